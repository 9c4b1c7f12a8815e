"""The CB oracle (tests/naive_cb.py) against hand-worked cases of VW's definitions."""

import math

import pytest

import naive_cb as nc


def ev(chosen=None, cost=0.0, p=0.0, k=3):
    return nc.Event({"s": 1.0}, [{f"a{i}": 1.0} for i in range(k)], chosen, cost, p)


# ----------------------------------------------------------------------------- estimators

def test_ips_targets_importance_weight_the_chosen_cost_and_zero_the_rest():
    assert nc.targets_ips(ev(1, 2.0, 0.5)) == [0.0, 4.0, 0.0]
    # clip_p raises a small probability before dividing; p <= 0 becomes 1e-3
    assert nc.targets_ips(ev(0, 1.0, 0.1), clip_p=0.5) == [2.0, 0.0, 0.0]
    assert nc.targets_ips(ev(2, 1.0, 0.0))[2] == pytest.approx(1000.0)


def test_dm_targets_are_the_raw_cost_and_zero_for_the_others():
    assert nc.targets_dm(ev(2, 0.7, 0.25)) == [0.0, 0.0, 0.7]


def test_dr_targets_correct_only_the_chosen_action():
    # ĝ = (1, 1, 1), chosen 1 with cost 2 at p = 0.5: 1 + (2 - 1)/0.5 = 3
    assert nc.targets_dr(ev(1, 2.0, 0.5), [1.0, 1.0, 1.0]) == [1.0, 3.0, 1.0]
    assert nc.targets_dr(ev(0, 0.0, 0.25), [0.5, -1.0, 2.0]) == [0.5 - 2.0, -1.0, 2.0]


def test_mtr_weight_is_inverse_propensity_times_events_per_action():
    # after events with 3 then 2 actions: 2 events / 5 actions; p = 0.25 -> 4 * 0.4
    assert nc.mtr_weight(ev(0, 1.0, 0.25), 2, 5) == pytest.approx(1.6)


def test_squared_sgd_step_by_hand():
    r = nc.SquaredSGD(lr=0.5)
    r.learn({"x": 2.0}, 1.0, 1.0)              # w = 0.5 * (1 - 0) * 2 = 1
    assert r.w == {"x": 1.0}
    r.learn({"x": 1.0, "y": 1.0}, 0.0, 2.0)    # ŷ = 1; g = 0.5*2*(0-1) = -1
    assert r.w == {"x": 0.0, "y": -1.0}


def test_cb_adf_mtr_learns_only_the_chosen_action_with_its_weight():
    m = nc.CbAdf("mtr", nc.SquaredSGD(lr=0.1), constant=False)
    before = m.learn(ev(1, 1.0, 0.5))
    assert before == [0.0, 0.0, 0.0]
    # one event of 3 actions: weight 1/0.5 * 1/3; features s and a1 each get 0.1*(2/3)*1
    assert m.policy.w == pytest.approx({"s": 0.2 / 3, "a1": 0.2 / 3})


def test_cb_adf_ips_regresses_every_action():
    m = nc.CbAdf("ips", nc.SquaredSGD(lr=0.1), constant=False)
    m.learn(ev(0, 1.0, 0.5, k=2))
    # targets (2, 0), predicted 0 before: a0 gets 0.1*2, s gets 0.1*2 then (a1 example: ŷ = 0.2) 0.1*(0-0.2)
    assert m.policy.w == pytest.approx({"s": 0.2 - 0.02, "a0": 0.2, "a1": -0.02})


def test_cb_adf_dr_cost_model_learns_the_chosen_action_with_weight_one_over_p():
    m = nc.CbAdf("dr", nc.SquaredSGD(lr=0.1), nc.SquaredSGD(lr=0.1), constant=False)
    m.learn(ev(1, 1.0, 0.5, k=2))
    # ĝ before = (0, 0): targets (0, 0 + 1/0.5) ; cost model: 0.1 * 2 * 1 on s and a1
    assert m.last_dr == [0.0, 0.0]
    assert m.cost_model.w == pytest.approx({"s": 0.2, "a1": 0.2})
    assert m.policy.w == pytest.approx({"s": 0.2, "a0": 0.0, "a1": 0.2})


def test_unlabelled_events_are_not_learned():
    m = nc.CbAdf("mtr", nc.SquaredSGD())
    m.learn(ev(None))
    m.learn(ev(0, 1.0, 0.0))   # probability 0: a test label in VW
    assert m.policy.w == {} and m.events_seen == 0


# ----------------------------------------------------------------------------- exploration

def test_rank_sorts_by_score_then_action():
    assert nc.rank([0.5, 0.1, 0.1]) == [(1, 0.1), (2, 0.1), (0, 0.5)]


def test_epsilon_greedy_and_ties():
    pmf = nc.epsilon_greedy(nc.rank([0.1, 0.5, 0.3]), 0.3)
    assert [a for a, _ in pmf] == [0, 2, 1]
    assert [p for _, p in pmf] == pytest.approx([0.8, 0.1, 0.1])
    tied = nc.epsilon_greedy(nc.rank([0.2, 0.2, 0.5]), 0.3)
    assert [p for _, p in tied] == pytest.approx([0.45, 0.45, 0.1])
    first_only = nc.epsilon_greedy(nc.rank([0.2, 0.2, 0.5]), 0.3, first_only=True)
    assert [p for _, p in first_only] == pytest.approx([0.8, 0.1, 0.1])


def test_enforce_minimum_probability_by_hand():
    assert nc.enforce_minimum_probability([1.0, 0.0, 0.0], 0.3) == pytest.approx([0.8, 0.1, 0.1])
    # sorted (.5, .5, 0), floor .1: rho = 1, tau = (1*.1 + 1 - 1)/2 = .05
    assert nc.enforce_minimum_probability([0.5, 0.5, 0.0], 0.3) == pytest.approx([0.45, 0.45, 0.1])
    # already above the floor: unchanged
    assert nc.enforce_minimum_probability([0.5, 0.3, 0.2], 0.3) == pytest.approx([0.5, 0.3, 0.2])
    assert nc.enforce_minimum_probability([0.5, 0.5], 0.0) == [0.5, 0.5]
    assert nc.enforce_minimum_probability([0.9, 0.1, 0.0], 1.0) == pytest.approx([1 / 3] * 3)


def test_softmax_by_hand():
    pmf = nc.softmax_pmf(nc.rank([1.0, 0.0]), lam=1.0)
    assert pmf[0] == (1, pytest.approx(1 / (1 + math.exp(-1))))
    assert pmf[1] == (0, pytest.approx(math.exp(-1) / (1 + math.exp(-1))))
    # negative lambda is made positive; lambda 0 is uniform
    assert nc.softmax_pmf(nc.rank([1.0, 0.0]), lam=-1.0) == pmf
    assert [p for _, p in nc.softmax_pmf(nc.rank([3.0, 0.0, 1.0]), lam=0.0)] == pytest.approx([1 / 3] * 3)


def test_squarecb_by_hand():
    pmf = nc.squarecb_pmf(nc.rank([0.0, 0.1, 0.2]), gamma=10.0)
    # 1/(3 + 10*0.1) = 0.25, 1/(3 + 10*0.2) = 0.2, best gets the rest
    assert [p for _, p in pmf] == pytest.approx([0.55, 0.25, 0.2])
    # gamma 0 (the first event: counter 0) is uniform
    assert [p for _, p in nc.squarecb_pmf(nc.rank([0.0, 5.0]), 0.0)] == pytest.approx([0.5, 0.5])
    assert nc.squarecb_gamma(10.0, 4) == pytest.approx(20.0)


def test_first_is_uniform_for_tau_learned_events_then_greedy():
    x = nc.CbExploreAdf(("first", 2, 0.0), constant=False)
    probs = []
    for _ in range(3):
        pmf, _ = x.step(ev(0, 1.0, 0.5))
        probs.append(sorted(p for _, p in pmf))
    assert probs[0] == pytest.approx([1 / 3] * 3) and probs[1] == pytest.approx([1 / 3] * 3)
    assert probs[2] == pytest.approx([0.0, 0.0, 1.0])
    # unlabelled events do not use up tau
    y = nc.CbExploreAdf(("first", 1, 0.0))
    y.step(ev(None))
    assert y.tau == 1
    assert [p for _, p in nc.first_pmf(nc.rank([0.1, 0.0]), 0, epsilon=0.2)] == pytest.approx([0.9, 0.1])


def test_bag_votes_by_hand():
    rankings = [nc.rank([0.0, 1.0, 2.0]), nc.rank([0.5, 1.0, 2.0]), nc.rank([1.0, 0.0, 2.0])]
    pmf = nc.bag_pmf(rankings)
    assert pmf == [(0, pytest.approx(2 / 3)), (1, pytest.approx(1 / 3)), (2, 0.0)]
    # a tie splits a member's vote
    assert nc.bag_pmf([nc.rank([0.0, 0.0, 1.0])]) == [(0, 0.5), (1, 0.5), (2, 0.0)]


def test_bag_members_learn_as_many_times_as_drawn():
    x = nc.CbExploreAdf(("bag", 3, 0.0, lambda i: [0, 1, 2][i]), cb_type="mtr")
    x.step(ev(0, 1.0, 0.5))
    assert [m.events_seen for m in x.members] == [0, 1, 2]


def test_squarecb_learns_without_importance_weights_except_on_the_last_action_line():
    x = nc.CbExploreAdf(("squarecb", 10.0, 0.0), make_regressor=lambda: nc.SquaredSGD(0.1), constant=False)
    x.step(ev(0, 1.0, 0.25, k=2))
    # mtr weight with p set to 1: 1 * (1 event / 2 actions) -> 0.1 * 0.5 * 1
    assert x.members[0].policy.w == pytest.approx({"s": 0.05, "a0": 0.05})
    y = nc.CbExploreAdf(("squarecb", 10.0, 0.0), make_regressor=lambda: nc.SquaredSGD(0.1), constant=False)
    y.step(ev(1, 1.0, 0.25, k=2))
    # the last action line keeps p = 0.25: weight 4 * 0.5
    assert y.members[0].policy.w == pytest.approx({"s": 0.2, "a1": 0.2})
    assert y.counter == 1


# ----------------------------------------------------------------------------- progress loss

def test_cb_explore_adf_loss_is_the_policy_probability_times_ips():
    pmf = [(0, 0.8), (1, 0.1), (2, 0.1)]
    assert nc.loss_cb_explore_adf(ev(1, 1.0, 0.5), pmf) == pytest.approx(0.2)
    assert nc.loss_cb_explore_adf(ev(None), pmf) == 0.0


def test_cb_adf_loss_ips_and_dr():
    e = ev(1, 2.0, 0.5)
    assert nc.loss_cb_adf(e, [0.3, 0.1, 0.2]) == pytest.approx(4.0)   # greedy = chosen
    assert nc.loss_cb_adf(e, [0.0, 0.1, 0.2]) == 0.0                   # greedy != chosen
    # DR: greedy 1 = chosen: ĝ + (c - ĝ)/p = 1 + 2
    assert nc.loss_cb_adf(e, [0.3, 0.1, 0.2], dr_pred=[0.0, 1.0, 0.0]) == pytest.approx(3.0)
    # DR: greedy 0 != chosen: ĝ_0
    assert nc.loss_cb_adf(e, [0.0, 0.1, 0.2], dr_pred=[0.7, 1.0, 0.0]) == pytest.approx(0.7)


def test_explore_predicts_before_learning():
    x = nc.CbExploreAdf(("epsilon", 0.0), make_regressor=lambda: nc.SquaredSGD(0.5), constant=False)
    pmf, loss = x.step(ev(2, -1.0, 0.5))
    # all scores 0 before the update: a three-way tie, each 1/3
    assert [p for _, p in pmf] == pytest.approx([1 / 3] * 3)
    assert loss == pytest.approx(1 / 3 * -1.0 / 0.5)
    pmf2, _ = x.step(ev(None))
    assert pmf2[0] == (2, pytest.approx(1.0))


# ----------------------------------------------------------------------------- sampling, cbify

def test_merand48_by_hand():
    # x = 0xeece66d5deece66d * 0 + 2147483647; (x >> 25) = 63 -> 63 / 2^23
    u, x = nc.merand48(0)
    assert x == 2147483647 and u == 63 / 2 ** 23
    u1, _ = nc.merand48(1)
    x1 = (0xEECE66D5DEECE66D + 2147483647) % 2 ** 64
    assert u1 == ((x1 >> 25) & 0x7FFFFF) / 2 ** 23


def test_sample_after_normalizing_picks_by_running_sum():
    u, _ = nc.merand48(7)
    probs = [0.2, 0.3, 0.5]
    expect = 0 if u * 1.0 < 0.2 else (1 if u < 0.5 else 2)
    assert nc.sample_after_normalizing(7, probs) == expect
    assert nc.sample_after_normalizing(7, [0.0, 0.0]) == 0
    assert nc.sample_after_normalizing(3, [0.0, 1.0]) == 1


def test_cbify_on_a_separable_toy_learns_the_classes():
    data = [(1 + (i % 2), {"x": 1.0 if i % 2 == 0 else -1.0}) for i in range(400)]
    # plain SGD with mtr's importance weights (up to 1/0.025 * 1/2) needs a small step: lr * 20 * |x|^2 < 2
    x = nc.CbExploreAdf(("epsilon", 0.05), make_regressor=lambda: nc.SquaredSGD(0.02), constant=False)
    loss, chosen = nc.cbify(data, 2, x)
    late = sum(c != lab for c, (lab, _) in zip(chosen[200:], data[200:])) / 200
    # once learned, only exploration misses: epsilon / K = 0.025 of the time
    assert late < 0.06 and loss < 0.1
    with pytest.raises(ValueError, match="constant=False"):
        nc.cbify(data, 2, nc.CbExploreAdf(("epsilon", 0.05)))


def test_vw_plain_sgd_by_hand():
    # VW --sgd --power_t 0 -l 0.1 (checked with VW 9.11.9): "1 | a" -> w_a = 2*0.1*1 = 0.2;
    # "0 2 | a b": ŷ = 0.2 in [0, 1]; g = 2*0.1*2*(0 - 0.2) = -0.08 -> w_a = 0.12, w_b = -0.08
    rng = nc.LabelRange()
    r = nc.VWPlainSGD(0.1, rng)
    r.learn({"a": 1.0}, 1.0)
    r.learn({"a": 1.0, "b": 1.0}, 0.0, 2.0)
    assert r.w == pytest.approx({"a": 0.12, "b": -0.08})
    assert r.predict({"b": 1.0}) == pytest.approx(-0.08)      # raw score (what csoaa_ldf ranks by)
    assert r.finalized({"b": 1.0}) == 0.0                      # clipped to the label range [0, 1]
    assert (rng.lo, rng.hi) == (0.0, 1.0)


def test_cbify_action_index_replaces_the_low_bits():
    # K = 26: mask 31; index 100 = 96 + 4 -> 96 + a
    assert [nc.cbify_action_index(100, a, 26) for a in (0, 1, 25)] == [96, 97, 121]
    # K = 2: mask 3; consecutive indices 8..11 all land on 8 + a
    assert {nc.cbify_action_index(i, 1, 2) for i in range(8, 12)} == {9}
    copies = nc.vw_action_copies({8: 1.0, 9: 2.0, 12: 0.5}, 2)
    assert copies == [{8: 3.0, 12: 0.5}, {9: 3.0, 13: 0.5}]
    # wraps into 2^bits
    assert nc.cbify_action_index((1 << 18) - 1, 3, 4, bits=18) == (1 << 18) - 8 + 3
