"""``olcli test --loss X`` scores with X and predicts as the model does.

The default mixture's weights pi_k = q_k exp(-eta L_k) take eta from the loss its cumulative
losses L_k were summed in, the model's own (engine/mixture.py mixing_rate), so another loss at
test changes the loss reported, never the predictions: the -p file is byte for byte the one
without --loss, and the average loss reported is X's loss of those predictions, computed here
from the -p file and the labels with the formulas of engine/losses.py's docstring. A multiclass
model is scored by its 0/1 error whatever the loss: another loss is refused.
"""

import json
import math
import os

import numpy as np
import pytest

from olcli import model as model_file
from olcli.learner import Learner

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data")
A9A_TRAIN, A9A_TEST = os.path.join(HERE, "a9a_train.vw"), os.path.join(HERE, "a9a_test.vw")
REGRESSION = os.path.join(HERE, "vw_0001.dat")       # labels 0 and 1
REAL_LABELS = os.path.join(HERE, "vw_0002.dat")      # labels in (0, 1), importance 1
LETTER = os.path.join(HERE, "letter_train.vw")
MIX_V1 = os.path.join(HERE, "mix_v1")


def labels_and_weights(path, logistic=False):
    """Each line's label and importance (VW's ``label [importance] [tag]|``); under the logistic
    loss a label 0 reads as -1 (engine/parse.py LABELS_BINARY)."""
    labels, weights = [], []
    for line in open(path):
        head = line.split("|")[0].split()
        y = float(head[0])
        labels.append(-1.0 if logistic and y == 0.0 else y)
        weights.append(float(head[1]) if len(head) > 1 and not head[1].startswith("'") else 1.0)
    return np.array(labels), np.array(weights)


def expected_loss(loss, p, y, h, tau=0.5):
    """The importance-weighted average of ``loss`` at predictions p and labels y."""
    if loss == "squared":
        each = (p - y) ** 2
    elif loss == "absolute":
        each = np.abs(p - y)
    elif loss == "logistic":
        each = np.array([math.log1p(math.exp(-a * b)) for a, b in zip(y, p)])
    elif loss == "hinge":
        each = np.maximum(0.0, 1.0 - y * p)
    elif loss == "quantile":
        each = np.where(y > p, tau * (y - p), (1.0 - tau) * (p - y))
    else:
        raise AssertionError(loss)
    return float(np.sum(h * each) / np.sum(h))


def scored_by_test(cli, data, model, *more, name="t"):
    """olcli test's -p bytes and report."""
    code, _, err = cli("test", data, "-i", model, "-p", f"{name}.txt", "--report", f"{name}.json", "--quiet", *more)
    assert code == 0, err
    with open(f"{name}.txt", "rb") as f, open(f"{name}.json") as g:
        return f.read(), json.load(g)


def check_scored_with(cli, data, model, loss, *more, tau=0.5):
    """The predictions of ``olcli test --loss loss`` are those of ``olcli test``; its average
    loss is ``loss``'s of them (to the -p file's 6 decimals)."""
    plain, plain_report = scored_by_test(cli, data, model, name="plain")
    other, report = scored_by_test(cli, data, model, "--loss", loss, *more, name=loss)
    assert other == plain
    assert report["loss"] == loss and report["loss"] != plain_report["loss"]
    p = np.array([float(line.split()[0]) for line in other.splitlines()])
    y, h = labels_and_weights(data, logistic=loss == "logistic")
    want = expected_loss(loss, p, y, h, tau)
    assert report["average_loss"] == pytest.approx(want, rel=1e-5, abs=1e-5)
    assert report["average_loss"] != pytest.approx(plain_report["average_loss"], rel=1e-3)


@pytest.fixture
def squared_model(cli):
    code, _, err = cli("train", REGRESSION, "-f", "squared.olm", "--quiet")
    assert code == 0, err
    assert model_file.load("squared.olm").loss == "squared" and model_file.load("squared.olm").algorithm == "mix"
    return "squared.olm"


@pytest.mark.parametrize("loss", ["absolute", "logistic"])
def test_a_squared_default_model_scored_with_another_loss_predicts_the_same(cli, squared_model, loss):
    check_scored_with(cli, REGRESSION, squared_model, loss)


def test_a_logistic_default_model_scored_with_another_loss_predicts_the_same(cli):
    code, _, err = cli("train", A9A_TRAIN, "--loss", "logistic", "-f", "logistic.olm", "--quiet")
    assert code == 0, err
    for loss in ("squared", "hinge"):
        check_scored_with(cli, A9A_TEST, "logistic.olm", loss)


def test_a_quantile_level_at_test_predicts_the_same(cli):
    code, _, err = cli("train", REAL_LABELS, "-f", "real.olm", "--quiet")
    assert code == 0, err
    check_scored_with(cli, REAL_LABELS, "real.olm", "quantile", "--quantile-tau", "0.2", tau=0.2)


@pytest.mark.parametrize("name, data, loss", [("vw0002_squared", REAL_LABELS, "absolute"),
                                              ("a9a_logistic", A9A_TEST, "squared")])
def test_a_mix_v1_model_scored_with_another_loss_predicts_the_same(cli, name, data, loss):
    """Format 4's default (engine/mixture_v1.py, sample_data/mix_v1) takes its rate by its own loss too."""
    model = os.path.join(MIX_V1, f"{name}.olm")
    assert Learner.from_model(model_file.load(model)).algorithm == "mix-v1"
    check_scored_with(cli, data, model, loss)


def test_vw_test_mode_with_another_loss_function_predicts_the_same(cli, squared_model):
    """``olcli vw -t -i M --loss_function X``: olcli test's --loss."""
    outputs = []
    for extra in ([], ["--loss_function", "absolute"]):
        code, _, err = cli("vw", "-t", "-i", squared_model, REGRESSION, "-p", "vw.txt", "--quiet", *extra)
        assert code == 0, err
        with open("vw.txt", "rb") as f:
            outputs.append(f.read())
    assert outputs[0] == outputs[1] and len(outputs[0].split()) == 200


def test_the_learner_and_its_one_call_path_predict_the_same_with_another_loss(squared_model):
    """What olcli test does to the loaded model (its ``loss`` set to the one scored) leaves the
    Python API's predictions and ``olcli serve``'s one-call path (engine/single.py, which reads the
    loss from its config array) as they were."""
    lines = [line.encode() for line in open(REGRESSION)]
    learner = Learner.from_model(model_file.load(squared_model))
    before = learner.evaluate(lines).predictions
    one_call = learner.line_predictor()
    assert one_call is not None
    replies = one_call.reply(b"".join(lines))
    assert replies is not None and replies.count(b"\n") == len(lines)
    learner.model.loss = "absolute"
    after = learner.evaluate(lines)
    assert np.array_equal(after.predictions, before)
    y, h = labels_and_weights(REGRESSION)
    assert after.loss == pytest.approx(expected_loss("absolute", before, y, h), rel=1e-12)
    assert learner.line_predictor().reply(b"".join(lines)) == replies


@pytest.fixture
def multiclass_model(cli):
    code, _, err = cli("train", LETTER, "--oaa", "26", "-f", "letter.olm", "--quiet")
    assert code == 0, err
    return "letter.olm"


def test_a_multiclass_model_refuses_another_loss(cli, multiclass_model):
    """Its average loss is the 0/1 error and its log loss the classes', whatever the loss:
    --loss other than its own is refused (exit 2, nothing written); its own is accepted and
    changes nothing."""
    own = model_file.load(multiclass_model).loss
    other = "logistic" if own != "logistic" else "squared"
    code, _, err = cli("test", LETTER, "-i", multiclass_model, "--loss", other, "-p", "x.txt", "--quiet")
    assert code == 2
    assert "multiclass" in err and "0/1 error" in err and "Traceback" not in err
    assert not os.path.exists("x.txt")
    code, _, err = cli("vw", "-t", "-i", multiclass_model, "--loss_function", other, LETTER, "--quiet")
    assert code == 2 and "multiclass" in err
    plain, report = scored_by_test(cli, LETTER, multiclass_model, name="plain")
    same, same_report = scored_by_test(cli, LETTER, multiclass_model, "--loss", own, name="own")
    assert same == plain and same_report["average_loss"] == report["average_loss"]
    labels = np.array([int(line.split()[0]) for line in open(LETTER)])
    predicted = np.array([int(line.split()[0]) for line in plain.splitlines()])
    assert report["average_loss"] == pytest.approx(np.mean(predicted != labels), rel=1e-12)


def test_a_softmax_model_refuses_another_loss(cli):
    model = os.path.join(HERE, "mix_format5", "letter_softmax26.olm")
    assert model_file.load(model).loss == "logistic"
    code, _, err = cli("test", LETTER, "-i", model, "--loss", "squared", "--quiet")
    assert code == 2 and "multiclass" in err
