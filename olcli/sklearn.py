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

The parameters are keyword-only (scikit-learn's convention) and come from olcli's
table of settings (olcli/settings.py): every row naming the estimator in
``Setting.estimator`` is a parameter, with the row's default unless the estimator
sets its own (the classifier's ``loss="logistic"`` and ``multiclass="oaa"``), plus
the algorithms' hyper-parameters ``l1``, ``l2``, ``learning_rate`` and ``epsilon``
(None: the algorithm's default). The settings of the Learner's keywords go to the
Learner as they are, so a new row of the table is a parameter of the estimators it
names without a line here.

Needs the optional extra ``olcli[sklearn]`` (scikit-learn and SciPy): the
command line and ``import olcli`` never import them.
"""

from inspect import Parameter, Signature

import numpy as np

from olcli import settings
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
# the algorithms' hyper-parameters the estimators take (engine/registry.py OPTIONS; None: the algorithm's)
HYPER = {"l1": "L1 strength", "l2": "L2 strength", "learning_rate": "AdaGrad's/SGD's eta, FTRL's alpha",
         "epsilon": "ScInOL's epsilon"}


def parameters(kind: str, defaults: dict) -> list:
    """The estimator's parameters, (name, default, help): the table's rows naming ``kind``
    in ``Setting.estimator`` (in the table's order, the row's default unless ``defaults``
    has the estimator's own), then the hyper-parameters (HYPER)."""
    rows = [row for row in settings.MODEL_SETTINGS + settings.RUN_SETTINGS if kind in row.estimator]
    return ([(row.name, defaults.get(row.name, row.default), row.help) for row in rows]
            + [(name, None, f"{text} (None: the algorithm's default)") for name, text in HYPER.items()])


def _keyword_only_init(names_defaults: list):
    """An ``__init__`` taking exactly these keyword-only parameters and storing each as
    given (scikit-learn's rule: no checks or changes in ``__init__``)."""
    names = frozenset(name for name, _ in names_defaults)

    def __init__(self, **params):
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {unknown[0]!r}")
        for name, default in names_defaults:
            setattr(self, name, params.get(name, default))

    __init__.__signature__ = Signature(
        [Parameter("self", Parameter.POSITIONAL_OR_KEYWORD)]
        + [Parameter(name, Parameter.KEYWORD_ONLY, default=default) for name, default in names_defaults])
    return __init__


# the end of an estimator's docstring, which its parameters and defaults follow (added when the class is made)
_LISTED = "show them too)."


class _OlcliEstimator(BaseEstimator):
    """What the classifier and the regressor share: the options -> a Learner, learning
    a batch, pickling. A subclass names its ``kind`` ("classifier", "regressor": the
    table's rows it takes) and its own ``defaults``; its ``__init__`` and the
    ``Parameters`` of its docstring are built from them (``parameters``)."""

    def __init_subclass__(cls, kind: str | None = None, defaults: dict | None = None, **more):
        super().__init_subclass__(**more)
        if kind is not None:
            cls._kind, cls._defaults = kind, dict(defaults or {})
        found = parameters(cls._kind, cls._defaults)
        cls._learner_rows = tuple(row for row in settings.MODEL_SETTINGS if cls._kind in row.estimator and row.keyword)
        cls.__init__ = _keyword_only_init([(name, default) for name, default, _ in found])
        cls.__init__.__qualname__ = f"{cls.__qualname__}.__init__"
        if cls.__doc__ and cls.__doc__.rstrip().endswith(_LISTED):
            cls.__doc__ = cls.__doc__.rstrip() + "\n\n    " + ", ".join(
                f"``{name}={default!r}``" for name, default, _ in found) + "\n"

    def _learner_keywords(self) -> dict:
        """The parameters that are the Learner's keywords (settings.KEYWORDS), as given."""
        return {row.name: getattr(self, row.name) for row in self._learner_rows}

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

        return Learner(self.algorithm, **self._learner_keywords(), **options, **self._hyper())

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


class OlcliClassifier(ClassifierMixin, _OlcliEstimator, kind="classifier",
                      defaults={"loss": "logistic", "multiclass": "oaa"}):
    """An online linear classifier (olcli's Learner) as a scikit-learn estimator.

    ``algorithm`` is one of ``olcli.algorithms()``; ``loss`` "logistic" or "hinge"
    (``predict_proba`` needs "logistic"); ``bits``: the hash table has 2**bits rows;
    ``passes`` over X in ``fit``; ``multiclass`` "oaa" or "softmax" (more than two
    classes); ``constant``: learn an intercept.

    Parameters (keyword-only): the rows of olcli's table of settings that name this
    estimator (``Setting.estimator``, olcli/settings.py) and the hyper-parameters ``l1``,
    ``l2``, ``learning_rate`` and ``epsilon`` (None: the algorithm's default); their
    defaults follow, listed when the class is made (``help()`` and ``inspect.signature``
    show them too).
    """

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


class OlcliRegressor(RegressorMixin, _OlcliEstimator, kind="regressor", defaults={"loss": "squared"}):
    """An online linear regressor (olcli's Learner) as a scikit-learn estimator.

    ``loss`` "squared", "absolute" or "quantile" (``quantile_tau``: its level, in
    (0, 1)); the others as for ``OlcliClassifier``.

    Parameters (keyword-only): the rows of olcli's table of settings that name this
    estimator (``Setting.estimator``, olcli/settings.py) and the hyper-parameters ``l1``,
    ``l2``, ``learning_rate`` and ``epsilon`` (None: the algorithm's default); their
    defaults follow, listed when the class is made (``help()`` and ``inspect.signature``
    show them too).
    """

    def fit(self, X, y, sample_weight=None):
        """A fresh learner, ``passes`` passes over (X, y) in row order."""
        passes = self._passes()
        X, y = validate_data(self, X, y, reset=True, y_numeric=True, **_CHECK)
        self.learner_ = self._new_learner()
        self._learn(X, y, sample_weight, passes)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """One pass over (X, y), continuing the learner (a fresh one on the first call)."""
        first = not hasattr(self, "learner_")
        X, y = validate_data(self, X, y, reset=first, y_numeric=True, **_CHECK)
        if first:
            self.learner_ = self._new_learner()
        self._learn(X, y, sample_weight)
        return self

    def predict(self, X):
        X = self._check_X(X)
        return self.learner_.predict(X)
