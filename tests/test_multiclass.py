"""--oaa and --softmax: the engine against slow references, and through the CLI."""

import json

import numpy as np
import pytest

from olcli.engine.multiclass import log_probabilities
from olcli.engine.records import Batch, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.learner import Learner
from tests import naive

OAA, SOFTMAX = "oaa", "softmax"

ROWS = 17  # one class block: 16 hashed rows + the constant


def stream(seed, n, classes, dim=ROWS):
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-2, 2, size=dim)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 6))
        index = np.sort(rng.choice(dim, size=k, replace=False)).astype(np.int32)
        out.append((index, rng.normal(size=k) * scale[index], float(rng.integers(1, classes + 1)),
                    float(rng.choice([0.0, 1.0, 2.0]))))
    return out


def run(name, mode, classes, examples, loss="logistic", params=None):
    """One example at a time through Learner.process (K blocks of ROWS rows)."""
    learner = Learner(name, loss=loss, bits=4, **{mode: classes}, **(params or {}))
    results = []
    for index, value, label, importance in examples:
        batch = Batch(np.array([label]), np.array([importance]), np.zeros(1), np.array([0, len(index)]), index,
                      value, np.array([len(index)]))
        done = learner.process(batch, True, new_tally())
        results.append((done.scores[0].copy(), done.predictions[0]))
    return results


@pytest.mark.parametrize("version,name", [(1, "scinol1"), (2, "scinol2")])
def test_multiclass_scinol_is_appendix_g(version, name):
    examples = stream(11 + version, 120, classes=4)
    reference = naive.ScInOLMultivariate(version, ROWS, 4, 1.0)
    got = run(name, SOFTMAX, 4, examples)
    for (index, value, label, importance), (scores, predicted) in zip(examples, got):
        x = dict(zip(index.tolist(), value.tolist()))
        if importance > 0:
            expected = reference.learn(x, int(label) - 1, importance, naive.softmax_gradient)
        else:
            expected = reference.scores(x)
        np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-12)
        assert predicted == 1 + int(np.argmax(expected))


@pytest.mark.parametrize("name", ["adagrad", "ftrl", "sgd", "adagrad-dual"])
@pytest.mark.parametrize("mode", [OAA, SOFTMAX])
def test_multiclass_is_k_copies_with_the_class_gradients(name, mode):
    classes = 3
    examples = stream(5, 100, classes)
    params = dict(ALGORITHMS[name].defaults)
    copies = [naive.REFERENCES[name](ROWS, params) for _ in range(classes)]
    got = run(name, mode, classes, examples, params=params)
    gradient = naive.softmax_gradient if mode == SOFTMAX else naive.oaa_gradient("logistic")
    for (index, value, label, importance), (scores, _) in zip(examples, got):
        x = dict(zip(index.tolist(), value.tolist()))
        expected = [c.predict(x) for c in copies]
        np.testing.assert_allclose(scores, expected, rtol=1e-9, atol=1e-12)
        if importance > 0:
            for c, g in zip(copies, gradient(expected, int(label) - 1)):
                dense = [0.0] * ROWS
                for i, v in x.items():
                    dense[i] = importance * g * v
                c.t += 1
                c.round(dense)


def test_log_probabilities():
    scores = np.array([2.0, -1.0, 0.5])
    out = np.empty(3)
    log_probabilities(scores, True, out)
    np.testing.assert_allclose(np.exp(out), naive.softmax(list(scores)), rtol=1e-12)
    log_probabilities(scores, False, out)
    sig = 1 / (1 + np.exp(-scores))
    np.testing.assert_allclose(np.exp(out), sig / sig.sum(), rtol=1e-12)


def test_oaa_through_the_cli(cli, sample):
    code, _, err = cli("train", sample / "letter_train.vw", "--adagrad", "--oaa", "26", "--loss", "logistic",
                       "-f", "m.olm", "--report", "r.json")
    assert code == 0, err
    r = json.load(open("r.json"))
    assert r["classes"] == 26 and r["multiclass"] == "oaa"
    assert "multiclass 0/1 error" in err and "multiclass log loss" in err
    assert 0 < r["average_loss"] < 0.7 and r["accuracy"] == pytest.approx(1 - r["average_loss"])
    assert r["total_features"] == sum(len(l.split()) - 1 for l in open(sample / "letter_train.vw"))
    code, out, _ = cli("test", sample / "letter_train.vw", "-i", "m.olm", "-p", "-", "--quiet")
    classes = [int(x) for x in out.split()]
    assert len(classes) == 3000 and set(classes) <= set(range(1, 27))
    code, out, _ = cli("test", sample / "letter_train.vw", "-i", "m.olm", "-p", "-", "--quiet", "--probabilities")
    rows = out.decode().splitlines()
    probabilities = [[float(t.split(":")[1]) for t in row.split()] for row in rows]
    assert all(len(p) == 26 and abs(sum(p) - 1) < 1e-4 for p in probabilities)
    # the most probable class is the predicted class
    assert [1 + int(np.argmax(p)) for p in probabilities][:200] == classes[:200]


def test_softmax_continuation_and_refusals(cli, sample, tmp_path):
    lines = (sample / "letter_train.vw").read_bytes().splitlines(keepends=True)
    (tmp_path / "A.vw").write_bytes(b"".join(lines[:1500]))
    (tmp_path / "B.vw").write_bytes(b"".join(lines[1500:]))
    assert cli("train", "A.vw", "--softmax", "26", "--scinol2", "-f", "a.olm", "--quiet")[0] == 0
    assert cli("train", "B.vw", "-i", "a.olm", "-f", "ab.olm", "--quiet")[0] == 0
    assert cli("train", "A.vw", "B.vw", "--softmax", "26", "--scinol2", "-f", "all.olm", "--quiet")[0] == 0
    assert (tmp_path / "ab.olm").read_bytes() == (tmp_path / "all.olm").read_bytes()
    code, _, err = cli("train", "B.vw", "-i", "a.olm", "--oaa", "26")
    assert code == 2 and "--softmax 26" in err
    code, _, err = cli("train", "A.vw", "--softmax", "26", "--loss", "hinge")
    assert code == 2 and "--softmax" in err
    code, _, err = cli("train", "A.vw", "--oaa", "3", "--report", "r.json")
    # letter's classes 4..26 are most lines: skipped, and the run exits 1 (most lines bad)
    assert code == 1 and "is not a class of --oaa/--softmax 3" in err
    assert json.load(open("r.json"))["bad_lines"] > 0


@pytest.mark.parametrize("name", ["gd", "coin"])
@pytest.mark.parametrize("mode", ["--oaa", "--softmax"])
def test_vw_learners_learn_multiclass_and_continue_exactly(cli, sample, tmp_path, name, mode):
    """--gd and --coin with K classes: the classes share the learner's global sums (as VW's
    OAA shares gd's), so continuing must carry them too."""
    lines = (sample / "letter_train.vw").read_bytes().splitlines(keepends=True)
    (tmp_path / "A.vw").write_bytes(b"".join(lines[:1500]))
    (tmp_path / "B.vw").write_bytes(b"".join(lines[1500:]))
    args = [f"--{name}", mode, "26", *(["--loss", "logistic"] if mode == "--oaa" else []), "--quiet"]
    assert cli("train", "A.vw", "-f", "a.olm", *args)[0] == 0
    assert cli("train", "B.vw", "-i", "a.olm", "-f", "ab.olm", "--quiet")[0] == 0
    code, _, err = cli("train", "A.vw", "B.vw", "-f", "all.olm", "--report", "r.json", *args)
    assert code == 0, err
    assert (tmp_path / "ab.olm").read_bytes() == (tmp_path / "all.olm").read_bytes()
    assert json.load(open("r.json"))["average_loss"] < 0.8  # chance: 0.96


@pytest.mark.parametrize("algorithm", ["gd", "mix"])
def test_softmax_class_whose_gradient_squared_underflows_changes_nothing(algorithm):
    """A class of softmax probability ~1e-200 has a gradient g whose square is 0:
    --gd's normalized, adaptive step then has no rate for a row never updated (1/0:
    a ZeroDivisionError before). Here every class's gradient underflows (the label's
    class has probability 1), so --gd learns nothing from the last line."""
    import olcli

    learner = olcli.Learner(algorithm, softmax=3)
    learner.learn(["1 | a", "1 | a", "2 | b", "3 | c"] * 3)
    before = learner.model.state.copy()
    learner.learn(["1 | a:212.69593866686918 never_seen"])
    assert np.isfinite(learner.model.state).all()
    if algorithm == "gd":
        assert np.array_equal(learner.model.state, before)
