"""The Python API of contextual bandits: ``olcli.Learner(..., cb=...)`` (olcli/cb_learner.py).

What the API learns from events is checked against the command lines run on the same events written as
VW's ADF text: the model files are the same bytes (``olcli train --cb-explore-adf`` with olcli's default
learner, ``olcli vw --cb_explore_adf`` with VW's gd), and the PMFs ``predict`` returns are the ones
``olcli vw -t -i MODEL -p`` writes.
"""

import pickle
import random
from pathlib import Path

import numpy as np
import pytest

import olcli
from olcli.cb_learner import CbLearner, sample
from olcli.errors import DataError, UsageError


def events(n=60, k=4, seed=3):
    """(shared, actions, chosen, cost, probability): users prefer one item each, costs -1 or 0."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        user = rnd.randrange(5)
        kk = rnd.choice([k, k - 1])
        shared = f"|u user{user} age:{rnd.randrange(1, 90)}"
        actions = [f"|a item{j} kind{(j + user) % 3}" for j in range(kk)]
        chosen = rnd.randrange(kk)
        cost = -1.0 if (chosen + user) % kk == 0 else rnd.choice([0.0, 0.25])
        out.append((shared, actions, chosen, cost, rnd.choice([1.0 / kk, 0.5, 0.8])))
    return out


def adf(evs) -> str:
    lines = []
    for shared, actions, chosen, cost, p in evs:
        lines.append("shared " + shared)
        lines += [(f"{j}:{cost!r}:{p!r} " if j == chosen else "") + a for j, a in enumerate(actions)]
        lines.append("")
    return "\n".join(lines) + "\n"


def learned(learner, evs):
    for e in evs:
        pmf = learner.learn(*e)
        assert pmf.shape == (len(e[1]),) and abs(pmf.sum() - 1.0) < 1e-9
    return learner


def test_train_default_learner_same_bytes(cli):
    evs = events()
    Path("d.ldf").write_text(adf(evs))
    code, _, err = cli("train", "--cb-explore-adf", "--epsilon", "0.1", "-d", "d.ldf", "-f", "cli.olm", "--quiet")
    assert code == 0, err
    learner = learned(olcli.Learner(cb={"epsilon": 0.1}), evs)
    assert isinstance(learner, CbLearner)
    learner.save("api.olm")
    assert Path("api.olm").read_bytes() == Path("cli.olm").read_bytes()


# (olcli vw's options, the API's cb=) with VW's default learner (gd)
VW_CASES = [
    (["--squarecb"], {"rule": "squarecb"}),
    (["--softmax", "--lambda", "2", "--cb_type", "ips"], {"rule": "softmax", "lambda": 2, "cb_type": "ips"}),
    (["--bag", "2", "--cb_type", "dr"], {"rule": "bag", "bag": 2, "cb_type": "dr"}),   # weight copies
    (["-q", "ua"], {}),   # interactions: the ranking from the kernel's raw scores
]


@pytest.mark.parametrize("vw_args, cb", VW_CASES)
def test_vw_gd_same_bytes_and_pmfs(cli, vw_args, cb):
    evs = events()
    Path("d.ldf").write_text(adf(evs))
    code, _, err = cli("vw", "--cb_explore_adf", *vw_args, "-d", "d.ldf", "-f", "cli.olm", "--quiet")
    assert code == 0, err
    interactions = ("ua",) if "-q" in vw_args else ()
    learner = learned(olcli.Learner("gd", interactions=interactions, cb=cb), evs)
    learner.save("api.olm")
    assert Path("api.olm").read_bytes() == Path("cli.olm").read_bytes()
    # the PMFs of the learned model: the API's predict against olcli vw -t -p (VW's ranked a:p lists)
    fresh = events(10, seed=9)
    Path("t.ldf").write_text(adf(fresh))
    code, _, err = cli("vw", "--cb_explore_adf", *[a for a in vw_args if a not in ("-q", "ua")], "-t", "-i",
                       "api.olm", "-d", "t.ldf", "-p", "p.txt", "--quiet")
    assert code == 0, err
    written = [block for block in Path("p.txt").read_text().split("\n\n") if block.strip()]
    assert len(written) == len(fresh)
    for (shared, actions, *_), text in zip(fresh, written):
        pmf = learner.predict(shared, actions)
        ranked = [(int(a), float(p)) for a, p in (item.split(":") for item in text.strip().split(","))]
        assert [a for a, _ in ranked] == [a for a, _ in learner.ranking(shared, actions)]
        for a, p in ranked:   # -p writes 6 significant digits
            assert pmf[a] == pytest.approx(p, rel=1e-5, abs=1e-6)


def test_cb_adf_ranks_and_plays_the_best(cli):
    evs = events()
    Path("d.ldf").write_text(adf(evs))
    code, _, err = cli("train", "--cb-adf", "--cb-type", "ips", "-d", "d.ldf", "-f", "cli.olm", "--quiet")
    assert code == 0, err
    learner = learned(olcli.Learner(cb={"reduction": "cb_adf", "cb_type": "ips"}), evs)
    learner.save("api.olm")
    assert Path("api.olm").read_bytes() == Path("cli.olm").read_bytes()
    shared, actions = evs[0][:2]
    scores = learner.scores(shared, actions)
    pmf = learner.predict(shared, actions)
    best = min(range(len(actions)), key=lambda a: (scores[a], a))
    assert pmf.tolist() == [1.0 if a == best else 0.0 for a in range(len(actions))]
    assert learner.ranking(shared, actions)[0] == (best, scores[best])


def test_load_pickle_and_continue_as_one_run(tmp_path):
    evs = events(40)
    whole = learned(olcli.Learner("gd", cb={"rule": "first", "first": 5, "epsilon": 0.1}), evs)
    half = learned(olcli.Learner("gd", cb={"rule": "first", "first": 5, "epsilon": 0.1}), evs[:17])
    half.save("half.olm")
    again = olcli.load("half.olm")
    assert isinstance(again, CbLearner) and again.settings == half.settings
    again = pickle.loads(pickle.dumps(again))
    learned(again, evs[17:])
    assert again.to_bytes() == whole.to_bytes()
    # a model that is not a CB model loads as a plain Learner
    plain = olcli.Learner("gd")
    plain.learn(["1 |a x"])
    plain.save("plain.olm")
    assert type(olcli.load("plain.olm")).__name__ == "Learner"


def test_predict_learns_nothing():
    learner = learned(olcli.Learner("gd", cb="cb_explore_adf"), events(20))
    raw = learner.to_bytes()
    shared, actions = events(1, seed=5)[0][:2]
    first = learner.predict(shared, actions)
    assert np.array_equal(first, learner.predict(shared, actions))
    assert learner.to_bytes() == raw


def test_sample_follows_vws_running_sum():
    ranking = [(2, 0.5), (0, 0.3), (1, 0.2)]   # VW's order: the draw walks the ranked list
    assert sample(ranking, 0.0) == 2
    assert sample(ranking, 0.49) == 2
    assert sample(ranking, 0.5) == 0           # running sum 0.5 is not > 0.5
    assert sample(ranking, 0.79) == 0
    assert sample(ranking, 0.81) == 1
    assert sample([(0, 0.0), (1, 1.0)], 0.0) == 1   # a zero-probability action is never drawn


@pytest.mark.parametrize("cb, message", [
    ({"rule": "greedy"}, "cb['rule'] must be one of"),
    ({"epsilon": "x"}, "cb['epsilon'] must be a number"),
    ({"lr": 1}, "cb['lr']: not a contextual-bandit setting"),
    ({"rule": "bag"}, "needs cb['bag']"),
    ({"reduction": "cb_adf", "epsilon": 0.1}, "an exploration setting"),
    ({"rule": "squarecb", "cb_type": "dr"}, "mtr only"),
    ("cb", "cb['reduction'] must be one of"),
])
def test_bad_settings_are_named(cb, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        olcli.Learner("gd", cb=cb)


def test_bad_loss_and_bad_events_are_named():
    with pytest.raises(UsageError, match="squared loss"):
        olcli.Learner("gd", "logistic", cb="cb_explore_adf")
    learner = olcli.Learner("gd", cb="cb_explore_adf")
    with pytest.raises(DataError, match="action 1: features text starts with a namespace bar"):
        learner.predict("|u a", ["|a x", "x y"])
    with pytest.raises(DataError, match="chosen: the logged action's position, 0..1"):
        learner.learn("|u a", ["|a x", "|a y"], 2, 0.0, 0.5)
    with pytest.raises(DataError, match=r"probability: the logged action's probability, in \(0, 1\]"):
        learner.learn("|u a", ["|a x", "|a y"], 0, 0.0, 0.0)
    with pytest.raises(DataError, match="at least one action"):
        learner.predict(None, [])
    assert learner.examples == 0   # nothing was learned
