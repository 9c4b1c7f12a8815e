"""olcli.cb (--cb_explore_adf over a Learner) step by step against the oracle tests/naive_cb.py."""

import random
from pathlib import Path

import pytest

import naive_cb as nc
import olcli
from olcli import cb
from olcli import cb_format as cf
from olcli.errors import UsageError

CB = Path(__file__).resolve().parent.parent / "sample_data" / "cb"
LR = 0.1


def plain_learner(constant):
    # VW's --sgd --power_t 0 -l LR, the oracle's VWPlainSGD(LR)
    return olcli.Learner("gd", loss="squared", bits=18, constant=constant, eta=LR, power_t=0.0,
                         adaptive=0, normalized=0, invariant=0)


def named(text):
    f, ns = {}, " "
    for tok in text.split():
        if tok.startswith("|"):
            ns = tok[1:] or " "
            continue
        name, _, v = tok.partition(":")
        f[ns + "^" + name] = f.get(ns + "^" + name, 0.0) + (float(v) if v else 1.0)
    return f


def oracle_event(e):
    return nc.Event(named(e.shared or ""), [named(a) for a in e.actions], e.chosen,
                    e.cost if e.cost is not None else 0.0, e.probability or 0.0)


def synthetic(n=40, seed=3):
    """Events with 2-4 actions, costs in [-1, 2], logging probabilities in (0, 1]."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.randint(2, 4)
        shared = "|u " + " ".join(f"s{rnd.randint(0, 5)}:{rnd.uniform(-1, 1):.3f}" for _ in range(2))
        actions = tuple("|a " + " ".join(f"x{rnd.randint(0, 7)}:{rnd.uniform(-1, 1):.3f}" for _ in range(3))
                        for _ in range(k))
        if i % 7 == 6:
            out.append(cf.CbEvent(shared, actions))
        else:
            out.append(cf.CbEvent(shared, actions, rnd.randrange(k), round(rnd.uniform(-1, 2), 3),
                                  round(rnd.uniform(0.2, 1.0), 3)))
    return out


RULES = [("epsilon", dict(epsilon=0.1), ("epsilon", 0.1)),
         ("softmax", dict(lam=1.0), ("softmax", 1.0, 0.0)),
         ("softmax", dict(lam=2.0, epsilon=0.2), ("softmax", 2.0, 0.2)),
         ("squarecb", dict(gamma_scale=10.0), ("squarecb", 10.0, 0.0)),
         ("first", dict(tau=3, epsilon=0.1), ("first", 3, 0.1)),
         ("bag", dict(bag=3), ("bag", 3, 0.0)),
         ("bag", dict(bag=2, epsilon=0.2, first_only=True), ("bag", 2, 0.2))]


def vw_poisson_draws(seed=0):
    """VW's bag draws: merand48 on the random state (seed 0) through bs::weight_gen's Poisson(1) CDF."""
    state = [seed]

    def draws(_member):
        u, state[0] = nc.merand48(state[0])
        return next((i for i, c in enumerate(cb.POISSON_CDF) if u <= c), 8)
    return draws


@pytest.mark.parametrize("source", ["cb_test_small.ldf", "synthetic"])
@pytest.mark.parametrize("cb_type", ["mtr", "ips", "dm", "dr"])
@pytest.mark.parametrize("rule, kwargs, oracle_rule", RULES)
def test_each_event_matches_the_oracle(source, cb_type, rule, kwargs, oracle_rule):
    """PMF and loss of every event equal the oracle's; the oracle equals VW 9.11.9 (cb_vs_vw.py part 4)."""
    if rule == "squarecb" and cb_type != "mtr":
        pytest.skip("squarecb learns mtr only")
    events = synthetic() if source == "synthetic" else list(cf.read_adf((CB / source).read_text().splitlines()))
    # the synthetic stream runs with the constant feature, except for dr and bag, whose weight copies
    # would share the learner's one constant (refused by cb.CbExploreAdf)
    constant = source == "synthetic" and cb_type != "dr" and rule != "bag"
    policy = cb.CbExploreAdf(plain_learner(constant), rule, cb_type=cb_type, **kwargs)
    rng = nc.LabelRange()
    if rule == "bag":
        oracle_rule = oracle_rule + (vw_poisson_draws(),)
    oracle = nc.CbExploreAdf(oracle_rule, cb_type=cb_type, make_regressor=lambda: nc.VWPlainSGD(LR, rng),
                             constant=constant, first_only=kwargs.get("first_only", False))
    for i, e in enumerate(events):
        pmf, loss = policy.step(e)
        opmf, oloss = oracle.step(oracle_event(e))
        assert [a for a, _ in pmf] == [a for a, _ in opmf], f"event {i}: ranking"
        assert [p for _, p in pmf] == pytest.approx([p for _, p in opmf], rel=1e-9, abs=1e-12), f"event {i}"
        assert loss == pytest.approx(oloss, rel=1e-9, abs=1e-12), f"event {i}"
    labelled = sum(e.labelled for e in events)
    assert policy.examples == len(events) and policy.labelled_weight == labelled


def test_vws_summary_numbers_on_cb_test_ldf():
    # VW 9.11.9, --cb_explore_adf --epsilon 0.1 -d cb_test.ldf --noconstant --sgd --power_t 0 -l 0.1
    # prints: number of examples = 3, average loss = 0.333333, total feature number = 27
    # (benchmarks/cb_vs_vw.py part 4 runs the same line)
    policy = cb.CbExploreAdf(plain_learner(False), "epsilon", epsilon=0.1)
    cb.run(cf.read_adf((CB / "cb_test.ldf").read_text().splitlines()), policy)
    assert policy.examples == 3
    assert policy.total_features == 27
    assert round(policy.average_loss, 6) == 0.333333


def test_learning_moves_the_pmf_toward_the_cheap_action():
    events = [cf.CbEvent("|u s", ("|a x", "|a y"), 1, 0.0, 0.5) if i % 2 else
              cf.CbEvent("|u s", ("|a x", "|a y"), 0, 1.0, 0.5) for i in range(40)]
    policy = cb.CbExploreAdf(plain_learner(True), "epsilon", epsilon=0.1)
    cb.run(events, policy)
    pmf, _ = policy.step(cf.CbEvent("|u s", ("|a x", "|a y")))
    assert pmf[0] == (1, pytest.approx(0.95))


def test_ips_value_and_interval():
    events = [cf.CbEvent(None, ("|a x", "|a y"), 0, 1.0, 0.5), cf.CbEvent(None, ("|a x", "|a y"), 1, 0.0, 0.5),
              cf.CbEvent(None, ("|a x", "|a y"))]
    pmfs = [[(0, 1.0), (1, 0.0)], [(0, 1.0), (1, 0.0)], [(0, 0.5), (1, 0.5)]]
    mean, (lo, hi) = cb.ips_value(events, pmfs)
    # per-event estimates 2 and 0: mean 1, sd sqrt(2), half-width 1.96 * sqrt(2) / sqrt(2)
    assert mean == 1.0 and lo == pytest.approx(1 - 1.96) and hi == pytest.approx(1 + 1.96)
    assert cb.ips_value(events[2:], pmfs[2:]) == (None, (None, None))


def test_refusals_name_the_option():
    with pytest.raises(UsageError, match="exploration rule"):
        cb.CbExploreAdf(plain_learner(True), "cover")
    with pytest.raises(UsageError, match="cb_type"):
        cb.CbExploreAdf(plain_learner(True), "epsilon", cb_type="sm")
    with pytest.raises(UsageError, match="bag needs"):
        cb.CbExploreAdf(plain_learner(False), "bag")
    with pytest.raises(UsageError, match="constant=False"):
        cb.CbExploreAdf(plain_learner(True), "epsilon", cb_type="dr")
    with pytest.raises(UsageError, match="squared loss"):
        cb.CbExploreAdf(olcli.Learner("gd", loss="logistic"), "epsilon")
    with pytest.raises(UsageError, match="epsilon"):
        cb.CbExploreAdf(plain_learner(True), "epsilon", epsilon=1.5)


def test_enforce_minimum_probability_agrees_with_the_oracle():
    for probs, eps in [([1.0, 0.0, 0.0], 0.3), ([0.5, 0.5, 0.0], 0.3), ([0.7, 0.2, 0.1, 0.0], 0.5),
                       ([0.25] * 4, 0.1), ([0.9, 0.1], 1.0)]:
        assert list(cb.enforce_minimum_probability(probs, eps)) == \
            pytest.approx(nc.enforce_minimum_probability(probs, eps))


def test_copies_are_disjoint_namespaces():
    assert cb.copy_features("| a b |u s", 0) == "| a b |u s"
    assert cb.copy_features("| a b |u s:2", 3) == "|~3 a b |u~3 s:2"
    assert cb.copy_features("|u:0.5 s", 1) == "|u~1:0.5 s"   # a namespace's scale stays its scale
