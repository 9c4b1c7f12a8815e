"""olcli.sklearn: the scikit-learn estimators on the Learner (the ``olcli[sklearn]`` extra)."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import load_iris, load_svmlight_file, load_wine, make_classification, make_regression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import olcli
from olcli.errors import DataError, UsageError
from olcli.sklearn import OlcliClassifier, OlcliRegressor

# --- scikit-learn's own estimator checks ---

# The checks that do not hold for an online learner, each with the reason. A check
# listed here that starts passing fails the run (xfail_strict), so the list stays honest.
_WEIGHTS_ARE_NOT_REPEATS = (
    "an online learner's model depends on the order of the examples, and the check shuffles the "
    "weighted rows but not the repeated ones; and importance k is one update with a k times larger "
    "gradient, not k updates, which the adaptive step sizes (AdaGrad's, FTRL's, ScInOL's, SGD's "
    "eta/sqrt(t)) tell apart. Weight-0 rows are ignored exactly: check_sample_weights_invariance "
    "and test_zero_weight_rows_are_ignored")
NOT_APPLICABLE = {
    "check_sample_weight_equivalence_on_dense_data": _WEIGHTS_ARE_NOT_REPEATS,
    "check_sample_weight_equivalence_on_sparse_data": _WEIGHTS_ARE_NOT_REPEATS,
}

CHECKED = [
    OlcliClassifier(),
    OlcliClassifier(algorithm="scinol2", multiclass="softmax"),
    OlcliClassifier(algorithm="ftrl", loss="hinge", learning_rate=0.2),   # no predict_proba
    OlcliRegressor(),
    OlcliRegressor(algorithm="scinol2"),
]


@parametrize_with_checks(CHECKED, expected_failed_checks=lambda estimator: NOT_APPLICABLE, xfail_strict=True)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# --- the optional extra ---

def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_importing_olcli_does_not_import_sklearn():
    # numba itself imports SciPy when it is installed, so only the CLI's start is SciPy-free.
    done = _python("import sys, olcli, olcli.cli\n"
                   "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))\n"
                   "olcli.Learner('scinol2', 'logistic').learn([b'1 | a', b'-1 | b'])\n"
                   "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]


def test_olcli_sklearn_without_scikit_learn_names_the_extra():
    done = _python("import sys\n"
                   "sys.modules['sklearn'] = None  # as if scikit-learn were not installed\n"
                   "from olcli.errors import MissingExtra\n"
                   "try:\n"
                   "    import olcli.sklearn\n"
                   "except MissingExtra as exc:\n"
                   "    print(exc.extra, '|', exc)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ('sklearn | the scikit-learn estimators needs the optional extra: '
                                   'pip install "olcli[sklearn]"')


# --- a real-ish problem: a9a ---

N_A9A = 124   # a9a's libsvm indices are 1..123 (1-based: checked below) -> columns 0..123, zero_based=True


def _a9a(sample, name):
    return load_svmlight_file(str(sample / name), n_features=N_A9A, zero_based=True)


def test_a9a_libsvm_file_is_one_based_and_column_j_is_index_j(sample):
    lines = (sample / "a9a_train.libsvm").read_text().splitlines()
    indices = [int(item.split(":")[0]) for line in lines for item in line.split()[1:]]
    assert min(indices) == 1 and max(indices) <= N_A9A - 1
    X, y = _a9a(sample, "a9a_train.libsvm")
    assert X.shape == (len(lines), N_A9A) and X[:, 0].nnz == 0
    for row in (0, 7, len(lines) - 1):
        label, *items = lines[row].split()
        assert y[row] == float(label)
        assert X[row].indices.tolist() == [int(item.split(":")[0]) for item in items]


def test_classifier_on_a9a_predicts_as_the_learner(sample):
    X, y = _a9a(sample, "a9a_train.libsvm")
    X_test, y_test = _a9a(sample, "a9a_test.libsvm")
    clf = OlcliClassifier().fit(X, y)
    learner = olcli.Learner(loss="logistic")   # the default algorithm, as the estimator's
    learner.learn((X, y))
    assert np.array_equal(clf.learner_.model.state, learner.model.state)
    assert np.array_equal(clf.decision_function(X_test), learner.decision_function((X_test, None)))
    assert np.array_equal(clf.predict_proba(X_test), learner.predict_proba((X_test, None)))
    assert np.array_equal(clf.predict(X_test), np.where(learner.decision_function(X_test) > 0, 1.0, -1.0))
    assert list(clf.classes_) == [-1.0, 1.0] and clf.n_features_in_ == N_A9A
    assert clf.score(X_test, y_test) > 0.82


def test_classifier_on_a9a_learns_the_model_olcli_train_writes(sample, cli):
    code, _, err = cli("train", sample / "a9a_train.libsvm", "--loss", "logistic", "-f", "m.olm", "--quiet")
    assert code == 0, err
    X, y = _a9a(sample, "a9a_train.libsvm")
    clf = OlcliClassifier().fit(X, y)
    trained = olcli.load("m.olm")
    assert np.array_equal(clf.learner_.model.state, trained.model.state)
    X_test, _ = _a9a(sample, "a9a_test.libsvm")
    assert np.array_equal(clf.decision_function(X_test), trained.decision_function(X_test))


@pytest.mark.parametrize("kind", ["binary", "softmax", "regression"])
@pytest.mark.parametrize("sparse", [False, True])
def test_partial_fit_on_halves_is_fit_on_the_whole(sample, kind, sparse):
    if kind == "binary":
        X, y = _a9a(sample, "a9a_train.libsvm")
        make, first = OlcliClassifier, {"classes": [-1, 1]}
    elif kind == "softmax":
        X, y = load_iris(return_X_y=True)
        order = np.random.default_rng(0).permutation(len(y))
        X, y = X[order], y[order]
        make, first = lambda: OlcliClassifier(algorithm="ftrl", multiclass="softmax"), {"classes": [0, 1, 2]}
    else:
        X, y = make_regression(n_samples=400, n_features=8, noise=1.0, random_state=0)
        make, first = lambda: OlcliRegressor(algorithm="scinol2"), {}
    X = sp.csr_matrix(X) if sparse else (X.toarray() if sp.issparse(X) else X)
    whole = make().fit(X, y)
    half = X.shape[0] // 2
    parts = make().partial_fit(X[:half], y[:half], **first)
    assert not np.array_equal(parts.learner_.model.state, whole.learner_.model.state)
    parts.partial_fit(X[half:], y[half:])
    assert np.array_equal(parts.learner_.model.state, whole.learner_.model.state)
    assert np.array_equal(parts.learner_.model.counters, whole.learner_.model.counters)
    assert np.array_equal(parts.predict(X), whole.predict(X))


def test_fit_makes_passes_over_the_data_in_order():
    X, y = make_classification(n_samples=300, n_features=6, random_state=1)
    three = OlcliClassifier(passes=3).fit(X, y)
    learner = olcli.Learner(loss="logistic")
    for _ in range(3):
        learner.learn((X, 2.0 * y - 1.0))
    assert np.array_equal(three.learner_.model.state, learner.model.state)
    assert not np.array_equal(OlcliClassifier().fit(X, y).learner_.model.state, learner.model.state)


def test_fit_starts_afresh_and_partial_fit_continues():
    X, y = make_classification(n_samples=200, n_features=5, random_state=2)
    clf = OlcliClassifier().fit(X, y)
    first = clf.learner_.model.state.copy()
    clf.fit(X, y)
    assert np.array_equal(clf.learner_.model.state, first)
    clf.partial_fit(X, y)
    assert clf.learner_.counters["examples"] == 400


# --- pipelines, labels, classes ---

def test_pipeline_with_standard_scaler():
    X, y = load_wine(return_X_y=True)
    order = np.random.default_rng(3).permutation(len(y))
    X, y = X[order] * [1, 1, 1, 1, 100, 1, 1, 1, 1, 1, 1, 1, 1000], y[order]
    pipe = make_pipeline(StandardScaler(), OlcliClassifier(passes=5)).fit(X, y)
    scaled = StandardScaler().fit_transform(X)
    alone = OlcliClassifier(passes=5).fit(scaled, y)
    assert np.array_equal(pipe.predict_proba(X), alone.predict_proba(scaled))
    assert pipe.score(X, y) > 0.95
    assert clone(pipe).fit(X, y).score(X, y) == pipe.score(X, y)


def test_string_class_labels():
    X, y = make_classification(n_samples=300, n_features=6, random_state=4)
    names = np.array(["spam", "ham"])[y]              # 0 -> spam, 1 -> ham; sorted: ham < spam
    clf = OlcliClassifier().fit(X, names)
    assert clf.classes_.tolist() == ["ham", "spam"]
    numeric = OlcliClassifier().fit(X, np.where(names == "spam", 1, -1))
    assert np.array_equal(clf.decision_function(X), numeric.decision_function(X))
    assert np.array_equal(clf.predict(X), np.where(numeric.predict(X) == 1, "spam", "ham"))
    assert np.array_equal(clf.predict_proba(X)[:, 1], numeric.predict_proba(X)[:, 1])
    assert clf.score(X, names) > 0.8
    with pytest.raises(ValueError, match="not in classes_"):
        clf.partial_fit(X[:3], ["ham", "eggs", "spam"])


@pytest.mark.parametrize("mode", ["oaa", "softmax"])
def test_multiclass(mode):
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(5).permutation(len(y))
    X = StandardScaler().fit_transform(X[order])
    names = np.array(["setosa", "versicolor", "virginica"])[y[order]]
    clf = OlcliClassifier(multiclass=mode, passes=10).fit(X, names)
    learner = olcli.Learner(loss="logistic", **{mode: 3})
    for _ in range(10):
        learner.learn((X, y[order] + 1))
    assert learner.model.multiclass == mode and clf.learner_.model.multiclass == mode
    assert np.array_equal(clf.learner_.model.state, learner.model.state)
    scores = clf.decision_function(X)
    proba = clf.predict_proba(X)
    assert scores.shape == proba.shape == (150, 3)
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(proba, learner.predict_proba(X))
    assert np.array_equal(clf.predict(X), clf.classes_[learner.predict(X) - 1])
    assert np.array_equal(np.argmax(proba, axis=1), np.argmax(scores, axis=1))
    assert clf.score(X, names) > 0.9


def test_oaa_and_softmax_are_different_learners():
    X, y = load_iris(return_X_y=True)
    oaa = OlcliClassifier(multiclass="oaa").fit(X, y)
    softmax = OlcliClassifier(multiclass="softmax").fit(X, y)
    assert not np.array_equal(oaa.decision_function(X), softmax.decision_function(X))


def test_partial_fit_classes():
    X, y = load_iris(return_X_y=True)
    clf = OlcliClassifier()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        clf.partial_fit(X, y)
    clf.partial_fit(X[y == 0], y[y == 0], classes=[2, 0, 1])   # one class seen, three known
    assert clf.classes_.tolist() == [0, 1, 2] and clf.learner_.classes == 3
    with pytest.raises(ValueError, match="differs from the classes"):
        clf.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="not in classes_"):
        clf.partial_fit(X[:2], [0, 3])
    with pytest.raises(ValueError, match="1 class"):
        OlcliClassifier().fit(X[y == 0], y[y == 0])


# --- sample weights ---

@pytest.mark.parametrize("algorithm", olcli.algorithms())
def test_zero_weight_rows_are_ignored(algorithm):
    X, y = make_classification(n_samples=200, n_features=6, random_state=6)
    noise = np.random.default_rng(6).normal(size=X.shape) * 5
    X2 = np.empty((400, 6))
    X2[0::2], X2[1::2] = X, noise
    y2 = np.empty(400, int)
    y2[0::2], y2[1::2] = y, 1 - y
    weight = np.zeros(400)
    weight[0::2] = 1.0
    plain = OlcliClassifier(algorithm=algorithm).fit(X, y)
    weighted = OlcliClassifier(algorithm=algorithm).fit(X2, y2, sample_weight=weight)
    assert np.array_equal(weighted.learner_.model.state, plain.learner_.model.state)
    assert np.array_equal(weighted.decision_function(X), plain.decision_function(X))
    unweighted = OlcliClassifier(algorithm=algorithm).fit(X2, y2)
    assert not np.array_equal(unweighted.decision_function(X), plain.decision_function(X))


def test_sample_weight_is_the_importance_weight():
    X, y = make_regression(n_samples=200, n_features=5, noise=2.0, random_state=7)
    weight = np.random.default_rng(7).uniform(0.5, 3.0, size=200)
    reg = OlcliRegressor().fit(X, y, sample_weight=weight)
    learner = olcli.Learner(loss="squared")
    learner.learn((X, y, weight))
    assert np.array_equal(reg.predict(X), learner.predict(X))
    assert not np.array_equal(reg.predict(X), OlcliRegressor().fit(X, y).predict(X))
    with pytest.raises(DataError, match="importance must be"):
        OlcliRegressor().fit(X, y, sample_weight=-weight)


# --- the regressor ---

def test_regressor_predicts_as_the_learner():
    X, y = make_regression(n_samples=500, n_features=10, n_informative=4, noise=5.0, random_state=8)
    reg = OlcliRegressor(algorithm="adagrad", passes=4, learning_rate=10.0).fit(X, y)   # y is in the hundreds
    learner = olcli.Learner("adagrad", "squared", eta=10.0)
    for _ in range(4):
        learner.learn((X, y))
    assert np.array_equal(reg.predict(X), learner.predict(X))
    assert reg.score(X, y) > 0.9
    absolute = OlcliRegressor(algorithm="adagrad", loss="absolute", passes=4, learning_rate=10.0).fit(X, y)
    assert absolute.learner_.loss == "absolute"
    assert not np.array_equal(absolute.predict(X), reg.predict(X))


def test_quantile_regression():
    rng = np.random.default_rng(14)
    X = rng.uniform(0, 1, size=(4000, 2))
    y = 3 * X[:, 0] + rng.normal(size=4000)
    low = OlcliRegressor(loss="quantile", quantile_tau=0.1, passes=3).fit(X, y)
    high = OlcliRegressor(loss="quantile", quantile_tau=0.9, passes=3).fit(X, y)
    assert low.learner_.model.loss_tau == 0.1 and high.learner_.model.loss_tau == 0.9
    assert 0.8 < np.mean(y < high.predict(X)) < 0.95 and 0.05 < np.mean(y < low.predict(X)) < 0.2
    with pytest.raises(UsageError, match="quantile_tau"):
        OlcliRegressor(loss="quantile", quantile_tau=1.5).fit(X, y)


# --- parameters ---

@pytest.mark.parametrize("algorithm, name", [("adagrad", "eta"), ("adagrad-dual", "eta"), ("ftrl", "alpha"),
                                             ("sgd", "eta")])
def test_learning_rate_sets_the_algorithms_rate(algorithm, name):
    X, y = make_classification(n_samples=50, n_features=4, random_state=9)
    clf = OlcliClassifier(algorithm=algorithm, learning_rate=0.0625).fit(X, y)
    assert clf.learner_.algorithm == algorithm and clf.learner_.params[name] == 0.0625
    assert clf.learner_.params != OlcliClassifier(algorithm=algorithm).fit(X, y).learner_.params


def test_hyper_parameters_reach_the_learner():
    X, y = make_classification(n_samples=50, n_features=4, random_state=10)
    clf = OlcliClassifier(algorithm="ftrl", l1=0.5, l2=0.25, bits=12, constant=False).fit(X, y)
    assert clf.learner_.params["l1"] == 0.5 and clf.learner_.params["l2"] == 0.25
    assert clf.learner_.model.bits == 12 and clf.learner_.model.constant is False
    assert OlcliClassifier(algorithm="scinol1", epsilon=4.0).fit(X, y).learner_.params == {"epsilon": 4.0}


@pytest.mark.parametrize("params, message", [
    ({"algorithm": "scinol2", "learning_rate": 0.1},
     r"learning_rate is not a hyper-parameter of --scinol2 \(it has: epsilon; learning_rate belongs to: "
     r"--adagrad, --adagrad-dual, --ftrl, --sgd, --gd, --mix\)"),
    ({"algorithm": "scinol2", "l1": 0.1}, "l1 is not a hyper-parameter of --scinol2"),
    ({"algorithm": "adagrad", "l1": 0.1, "l2": 0.1}, "--adagrad takes --l1 or --l2, not both"),
    ({"algorithm": "bogus"}, "unknown algorithm 'bogus'"),
    ({"learning_rate": -1}, r"eta \(-l/--learning-rate\) must be > 0"),
    ({"bits": 40}, "bits"),
    ({"loss": "cubic"}, "loss"),
    ({"passes": 0}, "passes must be a whole number >= 1"),
    ({"passes": 1.5}, "passes must be a whole number >= 1"),
    ({"multiclass": "ovr"}, "multiclass must be one of oaa, softmax"),
    ({"multiclass": "softmax", "loss": "hinge"}, "softmax"),
])
def test_bad_parameters_are_refused_at_fit_not_in_init(params, message):
    X, y = load_iris(return_X_y=True)
    clf = OlcliClassifier(**params)
    assert clf.get_params() == {**OlcliClassifier().get_params(), **params}
    with pytest.raises(UsageError, match=message):
        clf.fit(X, y)


def test_predict_proba_needs_the_logistic_loss():
    X, y = make_classification(n_samples=50, n_features=4, random_state=11)
    hinge = OlcliClassifier(loss="hinge").fit(X, y)
    assert not hasattr(hinge, "predict_proba")
    assert hasattr(OlcliClassifier().fit(X, y), "predict_proba")


# --- inputs ---

def test_inputs_are_validated():
    X, y = make_classification(n_samples=50, n_features=4, random_state=12)
    clf = OlcliClassifier().fit(X, y)
    with pytest.raises(ValueError, match="X has 5 features, but OlcliClassifier is expecting 4"):
        clf.predict(np.ones((2, 5)))
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        OlcliClassifier().fit(bad, y)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        clf.predict(bad)


def test_sparse_and_dense_give_the_same_model():
    X, y = make_classification(n_samples=200, n_features=8, random_state=13)
    X[np.abs(X) < 0.5] = 0.0
    dense = OlcliClassifier().fit(X, y)
    for matrix in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        assert np.array_equal(OlcliClassifier().fit(matrix(X), y).learner_.model.state, dense.learner_.model.state)


def test_pickle_keeps_the_model_and_the_summary():
    X, y = load_iris(return_X_y=True)
    clf = OlcliClassifier(multiclass="softmax").partial_fit(X[:100], y[:100], classes=[0, 1, 2])
    copy = pickle.loads(pickle.dumps(clf))
    assert np.array_equal(copy.predict_proba(X), clf.predict_proba(X))
    assert copy.learner_.summary() == clf.learner_.summary()
    copy.partial_fit(X[100:], y[100:])
    clf.partial_fit(X[100:], y[100:])
    assert np.array_equal(copy.learner_.model.state, clf.learner_.model.state)
    assert copy.learner_.summary() == clf.learner_.summary()


# --- the parameters come from the table of settings (olcli/settings.py) ---

def test_the_parameters_are_keyword_only_with_the_estimators_defaults():
    import inspect

    with pytest.raises(TypeError, match="positional"):
        OlcliClassifier("gd")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nonsense'"):
        OlcliRegressor(nonsense=1)
    for estimator, expected in (
            (OlcliClassifier, {"algorithm": "mix", "loss": "logistic", "bits": 18, "l1": None, "l2": None,
                               "learning_rate": None, "epsilon": None, "passes": 1, "multiclass": "oaa",
                               "constant": True}),
            (OlcliRegressor, {"algorithm": "mix", "loss": "squared", "bits": 18, "l1": None, "l2": None,
                              "learning_rate": None, "epsilon": None, "passes": 1, "constant": True,
                              "quantile_tau": 0.5})):
        assert estimator().get_params() == expected
        parameters = inspect.signature(estimator).parameters
        assert all(p.kind == p.KEYWORD_ONLY for p in parameters.values())
        assert {name: p.default for name, p in parameters.items()} == expected


def test_set_params_and_clone_round_trip():
    clf = OlcliClassifier().set_params(bits=12, multiclass="softmax", l2=0.01)
    assert clf.get_params()["bits"] == 12 and clf.multiclass == "softmax"
    again = clone(clf)
    assert again is not clf and again.get_params() == clf.get_params()
    reg = clone(OlcliRegressor(loss="quantile", quantile_tau=0.2))
    assert reg.get_params()["quantile_tau"] == 0.2 and repr(reg) == "OlcliRegressor(loss='quantile', quantile_tau=0.2)"


def test_a_new_row_of_the_table_is_a_parameter_without_editing_the_estimators(monkeypatch):
    """A row naming an estimator (Setting.estimator) becomes its parameter, with the row's
    default; a Learner keyword goes to the Learner: here the hash seed (a row the estimators
    do not take) and a row that is no Learner keyword."""
    from olcli import settings

    seed = settings.BY_NAME["hash_seed"].replace(estimator=("regressor",))
    extra = settings.Setting("probe_setting", "int", 5, keyword=False, estimator=("regressor", "classifier"))
    rows = tuple(seed if row.name == "hash_seed" else row for row in settings.MODEL_SETTINGS) + (extra,)
    monkeypatch.setattr(settings, "MODEL_SETTINGS", rows)

    class Regressor(OlcliRegressor):
        pass

    class Classifier(OlcliClassifier):
        pass

    assert Regressor().get_params()["hash_seed"] == 0 and Regressor().get_params()["probe_setting"] == 5
    assert "hash_seed" not in Classifier().get_params() and Classifier().get_params()["probe_setting"] == 5
    assert "hash_seed" not in OlcliRegressor().get_params()   # classes made before the row changed keep theirs
    X, y = make_regression(n_samples=40, n_features=3, random_state=2)
    reg = clone(Regressor(hash_seed=7, bits=10)).fit(X, y)
    assert reg.learner_.model.hash_seed == 7 and reg.get_params()["hash_seed"] == 7
    with pytest.raises(UsageError, match=r"hash_seed \(--hash-seed\) must be a whole number 0 to 2\^32-1 \(got -1\)"):
        Regressor(hash_seed=-1).fit(X, y)
