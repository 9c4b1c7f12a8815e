"""scikit-learn estimators on the Learner: ``OlcliClassifier`` and ``OlcliRegressor``.

    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from olcli.sklearn import OlcliClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = make_pipeline(StandardScaler(), OlcliClassifier(passes=3)).fit(X, y)
    >>> model.predict_proba(X[:2]).shape
    (2, 2)

Both wrap an ``olcli.Learner`` (``learner_`` once fitted; the only door to the
engine). Column j of X is the feature with libsvm index j, hashed modulo
``2**bits``, so a fitted estimator's ``learner_`` gives the same predictions as
``olcli train`` on the libsvm file whose indices are X's column numbers.

``fit`` starts a fresh learner and makes ``passes`` passes over X in row order;
``partial_fit`` continues the current one with one pass. Classes: two become the
labels -1/+1 of a binary learner, K > 2 the labels 1..K of a one-against-all
(``multiclass="oaa"``) or softmax (``multiclass="softmax"``) learner;
``classes_`` keeps the user's labels in sorted order.

Needs the optional extra ``olcli[sklearn]`` (scikit-learn and SciPy): the
command line and ``import olcli`` never import them.
"""

import numpy as np

from olcli.engine import registry
from olcli.errors import MissingExtra, UsageError

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils.metaestimators import available_if
    from sklearn.utils.multiclass import check_classification_targets, unique_labels
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted
except ImportError as exc:  # the optional extra is not installed
    raise MissingExtra("the scikit-learn estimators", "sklearn") from exc

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn 1.3 to 1.5
    def validate_data(estimator, X="no_validation", y="no_validation", reset=True, **check_params):
        return estimator._validate_data(X, y, reset=reset, **check_params)

__all__ = ["OlcliClassifier", "OlcliRegressor"]

_CHECK = dict(accept_sparse="csr", dtype=np.float64)
MULTICLASS_MODES = ("oaa", "softmax")


class _OlcliEstimator(BaseEstimator):
    """What the classifier and the regressor share: the options -> a Learner, learning
    a batch, pickling."""

    def _hyper(self) -> dict:
        """The algorithm's hyper-parameters by their registry names (None: its default)."""
        spec = registry.get(self.algorithm)
        hyper = {"l1": self.l1, "l2": self.l2, "epsilon": self.epsilon}
        if self.learning_rate is not None:
            rates = [p.name for p in spec.params if p.option == "learning_rate"]
            if not rates:
                raise UsageError(
                    f"learning_rate is not a hyper-parameter of --{spec.name} (it has: "
                    f"{', '.join(p.name for p in spec.params) or 'none'}; learning_rate belongs to: "
                    f"{', '.join('--' + a for a in registry.supporting('learning_rate'))})")
            hyper[rates[0]] = self.learning_rate
        return {name: value for name, value in hyper.items() if value is not None}

    def _passes(self) -> int:
        passes = self.passes
        if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 1:
            raise UsageError(f"passes must be a whole number >= 1 (got {passes!r})")
        return int(passes)

    def _new_learner(self, **options):
        from olcli.learner import Learner

        return Learner(self.algorithm, self.loss, self.bits, constant=self.constant, **options, **self._hyper())

    def _learn(self, X, labels, sample_weight, passes: int = 1) -> None:
        weight = None if sample_weight is None else _check_sample_weight(sample_weight, X, dtype=np.float64)
        for _ in range(passes):
            self.learner_.learn((X, labels, weight) if weight is not None else (X, labels))

    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, **_CHECK)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # A Learner holds its kernel module, which pickle refuses: keep its model file bytes
    # and its summary instead (the model round-trips bit for bit).
    def __getstate__(self):
        state = super().__getstate__()
        learner = state.get("learner_")
        if learner is not None:
            state = dict(state, learner_=(learner.to_bytes(), learner.tally))
        return state

    def __setstate__(self, state):
        packed = state.get("learner_")
        if isinstance(packed, tuple):
            from olcli.learner import Learner

            raw, tally = packed
            learner = Learner.from_bytes(raw, "<pickle>")
            learner.tally = tally
            state = dict(state, learner_=learner)
        super().__setstate__(state)


class OlcliClassifier(ClassifierMixin, _OlcliEstimator):
    """An online linear classifier (olcli's Learner) as a scikit-learn estimator.

    Parameters: ``algorithm`` (one of ``olcli.algorithms()``), ``loss``
    ("logistic" or "hinge"; ``predict_proba`` needs "logistic"), ``bits`` (hash
    table size 2**bits), ``l1``, ``l2``, ``learning_rate`` (AdaGrad's/SGD's eta,
    FTRL's alpha), ``epsilon`` (ScInOL) — None is the algorithm's default;
    ``passes`` over X in ``fit``; ``multiclass`` ("oaa" or "softmax", for more
    than two classes); ``constant`` (learn an intercept).
    """

    def __init__(self, algorithm="mix", loss="logistic", bits=18, l1=None, l2=None, learning_rate=None,
                 epsilon=None, passes=1, multiclass="oaa", constant=True):
        self.algorithm = algorithm
        self.loss = loss
        self.bits = bits
        self.l1 = l1
        self.l2 = l2
        self.learning_rate = learning_rate
        self.epsilon = epsilon
        self.passes = passes
        self.multiclass = multiclass
        self.constant = constant

    def fit(self, X, y, sample_weight=None):
        """A fresh learner, ``passes`` passes over (X, y) in row order."""
        passes = self._passes()
        X, y = validate_data(self, X, y, reset=True, **_CHECK)
        check_classification_targets(y)
        self._start(unique_labels(y))
        self._learn(X, self._labels(y), sample_weight, passes)
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over (X, y), continuing the learner; the first call (with no
        learner yet) needs ``classes``, every class y may hold."""
        first = not hasattr(self, "learner_")
        if first and classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit "
                             "(every class the data may hold)")
        X, y = validate_data(self, X, y, reset=first, **_CHECK)
        check_classification_targets(y)
        if first:
            self._start(unique_labels(classes))
        elif classes is not None and not np.array_equal(unique_labels(classes), self.classes_):
            raise ValueError(f"classes={unique_labels(classes)!r} differs from the classes of the first "
                             f"partial_fit call, {self.classes_!r}")
        self._learn(X, self._labels(y), sample_weight)
        return self

    def _start(self, classes) -> None:
        if len(classes) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes; got 1 class ({classes[0]!r})")
        if self.multiclass not in MULTICLASS_MODES:
            raise UsageError(f"multiclass must be one of {', '.join(MULTICLASS_MODES)} (got {self.multiclass!r})")
        learner = (self._new_learner() if len(classes) == 2
                   else self._new_learner(**{self.multiclass: len(classes)}))
        self.classes_ = classes
        self.learner_ = learner

    def _labels(self, y) -> np.ndarray:
        """The user's labels -> the Learner's: -1/+1 for two classes, 1..K for more."""
        index = np.searchsorted(self.classes_, y)
        known = index < len(self.classes_)
        known[known] = self.classes_[index[known]] == y[known]
        if not known.all():
            raise ValueError(f"y holds labels not in classes_ {self.classes_!r}: "
                             f"{np.unique(np.asarray(y)[~known])!r}")
        return 2.0 * index - 1.0 if len(self.classes_) == 2 else index + 1.0

    def decision_function(self, X):
        """Raw scores: (n,) for two classes (> 0 means ``classes_[1]``), (n, K) otherwise."""
        X = self._check_X(X)
        return self.learner_.decision_function(X)

    def predict(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def _probabilistic(self) -> bool:
        return self.loss == "logistic"

    @available_if(_probabilistic)
    def predict_proba(self, X):
        """Class probabilities, (n, K) in ``classes_`` order: the logistic of the
        score for two classes, softmax, or normalized OAA sigmoids (VW's)."""
        X = self._check_X(X)
        return self.learner_.predict_proba(X)

    @available_if(_probabilistic)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


class OlcliRegressor(RegressorMixin, _OlcliEstimator):
    """An online linear regressor (olcli's Learner) as a scikit-learn estimator.

    Parameters: ``algorithm``, ``loss`` ("squared", "absolute" or "quantile"),
    ``bits``, ``l1``, ``l2``, ``learning_rate``, ``epsilon``, ``passes``,
    ``constant``: as for ``OlcliClassifier``; ``quantile_tau``: the level of the
    quantile loss, in (0, 1).
    """

    def __init__(self, algorithm="mix", loss="squared", bits=18, l1=None, l2=None, learning_rate=None,
                 epsilon=None, passes=1, constant=True, quantile_tau=0.5):
        self.algorithm = algorithm
        self.loss = loss
        self.bits = bits
        self.l1 = l1
        self.l2 = l2
        self.learning_rate = learning_rate
        self.epsilon = epsilon
        self.passes = passes
        self.constant = constant
        self.quantile_tau = quantile_tau

    def fit(self, X, y, sample_weight=None):
        """A fresh learner, ``passes`` passes over (X, y) in row order."""
        passes = self._passes()
        X, y = validate_data(self, X, y, reset=True, y_numeric=True, **_CHECK)
        self.learner_ = self._new_learner(quantile_tau=self.quantile_tau)
        self._learn(X, y, sample_weight, passes)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """One pass over (X, y), continuing the learner (a fresh one on the first call)."""
        first = not hasattr(self, "learner_")
        X, y = validate_data(self, X, y, reset=first, y_numeric=True, **_CHECK)
        if first:
            self.learner_ = self._new_learner(quantile_tau=self.quantile_tau)
        self._learn(X, y, sample_weight)
        return self

    def predict(self, X):
        X = self._check_X(X)
        return self.learner_.predict(X)
