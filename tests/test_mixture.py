"""--mix (olcli/engine/mixture.py), the default: the exponentially weighted mixture of
--gd at -l 0.5, 3 and 10 and --coin (the first two with --oaa/--softmax; the first N with
--mix-members N), against tests/naive.py's Mixture step by step, its members against
themselves run alone, resume, merge and its model header. Format 4's default (mix-v1) is
tests/test_mixture_v1.py."""

import json
import math
import os

import numpy as np
import pytest

from olcli import model as model_file
from olcli.engine import mixture
from olcli.engine.records import C_LOSS, COUNTER_NAMES, Batch
from olcli.errors import ModelError
from olcli.learner import Learner
from tests import naive
from tests.test_mixture_v1 import continues_as_written
from tests.test_engine import (LOSSES, ROWS, assert_close, case_seed, learner, pack, run, sparse_stream,
                               subnormal_denominator_stream, vw_reference, vw_scalars, vw_state, vw_weights)

MEMBER_COLUMNS = mixture.MEMBER_COLUMNS
N = mixture.N_MEMBERS
# each member alone: its algorithm and hyper-parameters (the gd members' -l: 0.5, 3, 10)
ALONE = {"gd": ("gd", {}), "gd_x6": ("gd", {"eta": 3.0}), "gd_x20": ("gd", {"eta": 10.0}), "coin": ("coin", {})}


def reference_for(fast, loss, tau):
    """naive.Mixture of the members ``fast`` mixes (the first ``members`` of gd at three
    rates and coin), with the prior's first ``members`` entries."""
    params = fast.params
    members = []
    for rate in mixture.RATES:
        members.append(vw_reference("gd", {"eta": params["eta"] * rate, "power_t": params["power_t"],
                                           "initial_t": params["initial_t"], "adaptive": 1.0, "normalized": 1.0,
                                           "invariant": 1.0, "l1": 0.0, "l2": 0.0}, loss, tau))
    members.append(vw_reference("coin", {"alpha": params["alpha"], "beta": params["beta"]}, loss, tau))
    n = int(params["members"])
    return naive.Mixture(members[:n], naive.Mixture.PRIOR[:n], loss, tau)


def check_members(fast, reference, where):
    """Each VW member's columns and scalars against its reference; a member not mixed
    keeps its columns at 0 (it never learns)."""
    state, scalars = fast.model.state, fast.model.scalars
    for name, member in zip(mixture.MEMBERS, reference.members):
        assert_close(state[:, slice(*MEMBER_COLUMNS[name])], vw_state(member, ROWS), f"{name} state {where}")
        assert_close(scalars[slice(*mixture.MEMBER_SCALARS[name])], vw_scalars(member), f"{name} scalars {where}")
    for name in mixture.MEMBERS[len(reference.members):]:
        assert not state[:, slice(*MEMBER_COLUMNS[name])].any(), f"{name}, not mixed, learned {where}"


def _log_probabilities(s, softmax):
    """A member's class log-probabilities from its K scores: the softmax's, or OAA's
    sigmoids normalised to sum to 1 (the mixture's multiclass log loss, mixture.py)."""
    if softmax:
        return s - (s.max() + math.log(np.exp(s - s.max()).sum()))
    sig = 1.0 / (1.0 + np.exp(-s))
    return np.log(sig) - math.log(sig.sum())


@pytest.mark.parametrize("variant", [{}, {"alpha": 1.0, "eta": 0.2}, {"members": 2.0}, {"members": 3.0}])
@pytest.mark.parametrize("loss", LOSSES)
def test_mixture_matches_the_reference_step_by_step(loss, variant):
    """Every prediction, the VW members' state and scalars, the three cumulative
    losses and the mixture's weights after every example, against naive.Mixture
    (which composes naive_vw's gd and coin and naive's ScInOL2): same stream as
    the members' own step-by-step tests (scales over six decades, importance 0,
    unlabeled examples, a base)."""
    tau = 0.3
    fast = learner("mix", loss, variant, tau)
    reference = reference_for(fast, loss, tau)
    examples = sparse_stream(seed=case_seed("mix", loss, variant), n=150, loss=loss)
    for step, (index, value, label, importance, base) in enumerate(examples):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        features = list(zip(index.tolist(), value.tolist()))
        expected = reference.step(features, label, importance, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        check_members(fast, reference, f"after {step}")
        scalars = fast.model.scalars
        mixed = len(reference.members)
        assert_close(scalars[mixture.LOSSES:mixture.LOSSES + N], reference.L + [0.0] * (N - mixed),
                     f"losses after {step}")
        seen = reference.labels
        assert_close(scalars[mixture.SEEN:], [len(seen), min(seen, default=0.0), max(seen, default=0.0)],
                     f"labels seen after {step}")
        want = reference.weights([vw_weights(m, ROWS) for m in reference.members])
        assert_close(fast.weights(), np.array(want), f"weights after {step}")


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("variant", [{"beta": 0.0}, {}])
def test_the_coin_member_bets_0_where_its_denominator_is_subnormal(variant, loss):
    """The coin member's bet is coin._bet's: 0 while L M (L M + G) is below the smallest
    normal double (tests/test_engine.py's test_coin_bets_0_where_its_denominator_is_subnormal),
    so tiny importance weights with beta 0, or tiny values, leave every number finite;
    step by step against naive.Mixture, whose coin member is naive_vw's VWCoin."""
    tau = 0.3
    fast = learner("mix", loss, variant, tau)
    reference = reference_for(fast, loss, tau)
    for step, (index, value, label, importance, base) in enumerate(subnormal_denominator_stream(11)):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        expected = reference.step(list(zip(index.tolist(), value.tolist())), label, importance, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        assert np.isfinite(fast.model.state).all() and np.isfinite(fast.model.scalars).all(), f"after {step}"
        check_members(fast, reference, f"after {step}")


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_only_losses_of_examples_not_yet_learned_count(loss):
    """Two passes over one stream with every 3rd example held out, step by step
    against naive.Mixture: in pass 1 every example learned from and every held-out
    one adds its members' losses; in pass 2 (a later pass with holdout: the
    tally's H_ROWS set, as run.py and scaleout.py set it) only the held-out ones,
    scored by the members' predictors and never learned. Predictions, members'
    states, losses and weights after every example."""
    from olcli.engine.records import new_tally

    tau = 0.3
    fast = learner("mix", loss, {}, tau)
    reference = reference_for(fast, loss, tau)
    examples = sparse_stream(seed=case_seed("mix-holdout", loss, {}), n=90, loss=loss)
    period = 3
    frozen_learned = []   # pass 2: the losses just before and after each learned example
    for number in (1, 2):
        tally = new_tally(holdout_period=period, holdout_rows=number > 1)
        reference.later_pass = number > 1
        for step, (index, value, label, importance, base) in enumerate(examples):
            labels, imp, bases, row_ptr, idx, val = pack([(index, value, label, importance, base)])
            before = fast.model.scalars[mixture.LOSSES:mixture.LOSSES + N].copy()
            p = fast.process(Batch(labels, imp, bases, row_ptr, idx, val, np.diff(row_ptr)), True, tally).predictions[0]
            features = list(zip(index.tolist(), value.tolist()))
            held_out = (step + 1) % period == 0
            if math.isnan(label):
                expected = reference.predict(features, base)
            elif held_out:
                expected = reference.hold_out(features, label, importance, base)
            elif importance > 0:
                expected = reference.learn(features, label, importance, base)
                if number == 2:
                    frozen_learned.append((before, fast.model.scalars[mixture.LOSSES:mixture.LOSSES + N].copy()))
            else:
                reference.see_label(label)
                expected = reference.predict(features, base)
            where = f"pass {number}, example {step}"
            assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction, {where}"
            check_members(fast, reference, where)
            assert_close(fast.model.scalars[mixture.LOSSES:mixture.LOSSES + N], reference.L, f"losses, {where}")
            want = reference.weights([vw_weights(m, ROWS) for m in reference.members])
            assert_close(fast.weights(), np.array(want), f"weights, {where}")
    # the rule did something: pass 2 learned from examples without counting them, held-out ones counted
    assert frozen_learned and all(np.array_equal(a, b) for a, b in frozen_learned)
    assert tally.holdout[4] > 0   # H_WEIGHT: held-out examples were scored in pass 2


@pytest.mark.parametrize("members", [None, 4])
@pytest.mark.parametrize("loss,multiclass", [("logistic", {"oaa": 3}), (None, {"softmax": 3})])
def test_multiclass_counts_only_losses_of_examples_not_yet_learned(loss, multiclass, members):
    """Multiclass, two passes with every 4th example held out: the class scores
    are sum_k pi_k scores_k with pi from the members' 0/1 errors of (pass 1)
    every example and (pass 2) the held-out ones only; each member run alone
    with the same holdout gives its scores."""
    from olcli.engine.records import new_tally

    classes, period = max(multiclass.values()), 4
    batch = _stream(12, 300, classes=classes)
    mix = Learner("mix", loss=loss, bits=8, **multiclass, members=members)
    n = _mixed(mix, members)
    names = mixture.MEMBERS[:n]
    members = {name: Learner(ALONE[name][0], loss=loss, bits=8, **multiclass, **ALONE[name][1]) for name in names}
    cumulative = np.zeros(n)
    for number in (1, 2):
        got = mix.process(batch, True, new_tally(period, number > 1)).scores
        member_scores = [m.process(batch, True, new_tally(period, number > 1)).scores for m in members.values()]
        for e in range(len(batch.labels)):
            pi = np.array(naive.Mixture.PRIOR[:n]) * np.exp(-(cumulative - cumulative.min()))
            pi /= pi.sum()
            want = sum(pi[k] * member_scores[k][e] for k in range(n))
            np.testing.assert_allclose(got[e], want, rtol=1e-12, atol=1e-12, err_msg=f"pass {number}, example {e}")
            held_out = (e + 1) % period == 0
            if number == 2 and not held_out:
                continue
            label = int(batch.labels[e]) - 1
            for k in range(n):   # the 0/1 error of each member's own scores (the loss VW prints)
                cumulative[k] += batch.importance[e] * float(int(np.argmax(member_scores[k][e])) != label)
    np.testing.assert_allclose(mix.model.scalars[mixture.LOSSES:mixture.LOSSES + N],
                               np.r_[cumulative, np.zeros(N - n)], rtol=1e-12)
    for name in names:   # the members learned as alone
        assert np.array_equal(members[name].model.state, mix.model.state[:, slice(*MEMBER_COLUMNS[name])]), name
    for name in mixture.MEMBERS[n:]:   # the others never learned
        assert not mix.model.state[:, slice(*MEMBER_COLUMNS[name])].any(), name


def _mixed(mix, members):
    """The number of members ``mix`` mixes, checked against the rule: as given, else 2
    for a multiclass model and 4 for one output."""
    n = int(mix.params["members"])
    assert n == (members if members is not None else 2 if mix.model.classes else 4)
    assert mix.model.slots == mixture.SLOTS[:3 * n if n < N else len(mixture.SLOTS)]   # their columns only
    assert mix.model.state.shape[1] == len(mix.model.slots)
    return n


def _stream(seed, n, classes=0, loss="logistic"):
    """A seeded batch over 2^8 rows: 6 features each, scales 0.5..2, labels from a
    hidden linear model (+-1, real, or 1..classes)."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, 256, size=(n, 6)).astype(np.int32)
    value = rng.normal(size=(n, 6)) * rng.choice([0.5, 1.0, 2.0], size=(n, 6))
    score = (rng.normal(size=256)[index] * value).sum(axis=1)
    if classes:
        labels = (np.abs(score * 2).astype(int) % classes + 1).astype(float)
    else:
        labels = np.where(score > 0, 1.0, -1.0) if loss == "logistic" else score
    return Batch(labels, rng.choice([0.5, 1.0, 2.0], size=n), np.zeros(n), np.arange(0, 6 * n + 1, 6, dtype=np.int64),
                 index.ravel(), value.ravel(), np.full(n, 6, np.int64))


def _part(batch, lo, hi):
    return Batch(batch.labels[lo:hi], batch.importance[lo:hi], batch.base[lo:hi],
                 batch.row_ptr[lo:hi + 1] - batch.row_ptr[lo], batch.index[batch.row_ptr[lo]:batch.row_ptr[hi]],
                 batch.value[batch.row_ptr[lo]:batch.row_ptr[hi]], batch.feature_count[lo:hi])


MODES = [("logistic", {}), ("squared", {}), ("hinge", {}), ("logistic", {"oaa": 4}), (None, {"softmax": 4})]


@pytest.mark.parametrize("members", [None, 1, 2, 3, 4])
@pytest.mark.parametrize("loss,multiclass", MODES)
def test_each_member_learns_exactly_as_alone(loss, multiclass, members):
    """Inside the mixture each member mixed ends, columns and scalars, bit for bit
    where the member alone (--gd -l 0.5, --gd -l 3, --gd -l 10, --coin) ends on the
    same stream (with --oaa/--softmax by default the first two)."""
    batch = _stream(3, 1500, classes=max(multiclass.values(), default=0), loss=loss or "logistic")
    mix = Learner("mix", loss=loss, bits=8, **multiclass, members=members)
    mix.process(batch, True)
    n = _mixed(mix, members)
    for name in mixture.MEMBERS[n:]:
        assert not mix.model.state[:, slice(*MEMBER_COLUMNS[name])].any(), name
        assert not mix.model.scalars[mixture.LOSSES + mixture.MEMBERS.index(name)], name
    for name, columns in list(MEMBER_COLUMNS.items())[:n]:
        alone = Learner(ALONE[name][0], loss=loss, bits=8, **multiclass, **ALONE[name][1])
        alone.process(batch, True)
        assert np.array_equal(alone.model.state, mix.model.state[:, slice(*columns)]), name
        assert np.array_equal(alone.model.scalars, mix.model.scalars[slice(*mixture.MEMBER_SCALARS[name])]), name
        same = np.arange(len(COUNTER_NAMES)) != C_LOSS   # the loss sum is the mixture's own
        assert np.array_equal(alone.model.counters[same], mix.model.counters[same]), name


@pytest.mark.parametrize("members", [None, 3, 4])
@pytest.mark.parametrize("loss,multiclass", MODES[-2:])
def test_multiclass_scores_are_the_weighted_members_scores(loss, multiclass, members):
    """The mixture's class scores are sum_k pi_k scores_k over the members it mixes
    (by default the first two), with pi from each member's 0/1 error (its own scores'
    argmax against the label) on the examples before; recomputed here from the members
    run alone."""
    classes = max(multiclass.values())
    batch = _stream(4, 400, classes=classes)
    mix = Learner("mix", loss=loss, bits=8, **multiclass, members=members)
    got = mix.process(batch, True).scores
    n = _mixed(mix, members)
    member_scores = []
    for name in mixture.MEMBERS[:n]:
        alone = Learner(ALONE[name][0], loss=loss, bits=8, **multiclass, **ALONE[name][1])
        member_scores.append(alone.process(batch, True).scores)
    cumulative = np.zeros(n)
    for e in range(len(batch.labels)):
        pi = np.array(naive.Mixture.PRIOR[:n]) * np.exp(-(cumulative - cumulative.min()))
        pi /= pi.sum()
        want = sum(pi[k] * member_scores[k][e] for k in range(n))
        np.testing.assert_allclose(got[e], want, rtol=1e-12, atol=1e-12, err_msg=f"example {e}")
        label = int(batch.labels[e]) - 1
        for k in range(n):   # each member's 0/1 error (the loss VW prints)
            cumulative[k] += batch.importance[e] * float(int(np.argmax(member_scores[k][e])) != label)


@pytest.mark.parametrize("members", [None, 2, 4])
@pytest.mark.parametrize("loss,multiclass", [("logistic", {}), ("squared", {}), ("logistic", {"oaa": 3}),
                                             (None, {"softmax": 3})])
def test_save_and_continue_is_bit_identical(loss, multiclass, members):
    """Saved mid-stream, loaded and continued equals the uninterrupted run, bit for bit."""
    batch = _stream(5, 900, classes=max(multiclass.values(), default=0), loss=loss or "logistic")
    whole = Learner("mix", loss=loss, bits=8, **multiclass, members=members)
    expected = whole.process(batch, True).predictions
    first = Learner("mix", loss=loss, bits=8, **multiclass, members=members)
    head = first.process(_part(batch, 0, 400), True).predictions
    resumed = Learner.from_bytes(first.to_bytes())
    tail = resumed.process(_part(batch, 400, 900), True).predictions
    assert np.array_equal(np.concatenate([head, tail]), expected)
    assert np.array_equal(resumed.model.state, whole.model.state)
    assert np.array_equal(resumed.model.scalars, whole.model.scalars)


@pytest.mark.parametrize("members", [None, 2])
@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_merge_merges_each_member_by_its_own_rule(loss, members):
    """Learner.merge of mixtures: each member's columns and scalars are what that
    member's own merge gives for the members run alone on the same shards; each
    cumulative loss is the sum of the shards' (here from an empty base). With two
    members mixed the table holds their columns only, and the others' losses stay 0."""
    batch = _stream(6, 1200, loss=loss)
    shards = [_part(batch, 0, 600), _part(batch, 600, 1200)]
    mixes = []
    for shard in shards:
        m = Learner("mix", loss=loss, bits=8, members=members)
        m.process(shard, True)
        mixes.append(m)
    merged = Learner.merge(mixes)
    n = _mixed(merged, members)
    assert not merged.model.scalars[mixture.LOSSES + n:mixture.LOSSES + N].any()
    for name, columns in list(MEMBER_COLUMNS.items())[:n]:
        alone = []
        for shard in shards:
            a = Learner(ALONE[name][0], loss=loss, bits=8, **ALONE[name][1])
            a.process(shard, True)
            alone.append(a)
        assert np.array_equal(Learner.merge(alone).model.state, merged.model.state[:, slice(*columns)]), name
        part = slice(*mixture.MEMBER_SCALARS[name])
        assert np.array_equal(Learner.merge(alone).model.scalars, merged.model.scalars[part]), name
    losses = slice(mixture.LOSSES, mixture.SEEN + 1)   # the four losses and the label count add up
    np.testing.assert_allclose(merged.model.scalars[losses],
                               mixes[0].model.scalars[losses] + mixes[1].model.scalars[losses], rtol=1e-15)
    assert merged.model.scalars[mixture.LOW] == min(m.model.scalars[mixture.LOW] for m in mixes)
    assert merged.model.scalars[mixture.HIGH] == max(m.model.scalars[mixture.HIGH] for m in mixes)
    # the merged learner predicts with sum_k pi_k w_k of the merged members
    assert np.all(np.isfinite(merged.weights()))


@pytest.mark.parametrize("field,value,message", [
    (("scalars",), {"gd_total_weight": 1.0}, "scalars"),
    (("state", "slots"), ["w", "G", "N"], "state slots"),
    (("params",), {"eta": 0.5}, "hyper-parameters"),
    (("params",), {"eta": 0.5, "power_t": 0.5, "initial_t": 0.0, "alpha": -1.0, "beta": 1.0}, "alpha"),
    (("params",), {"eta": 0.5, "power_t": 0.5, "initial_t": 0.0, "alpha": 4.0, "beta": 1.0, "members": 2.5},
     "members"),
])
def test_crafted_headers_are_refused(field, value, message):
    m = Learner("mix", loss="logistic", bits=8)
    m.process(_stream(7, 20), True)
    header = m.model.header()
    holder = header
    for key in field[:-1]:
        holder = holder[key]
    holder[field[-1]] = value
    with pytest.raises(ModelError, match=message):
        model_file.validate(header, "crafted.olm")


@pytest.mark.parametrize("loss,multiclass", [("logistic", {}), ("squared", {}), ("logistic", {"oaa": 3})])
def test_bookkeeping_is_the_drivers(loss, multiclass):
    """--mix has its own loops (mixture.py); with holdout on, what they count
    (examples, weights, labels, features, holdout weight, the model's counters but
    the loss sum) is what driver.run_binary / multiclass.run_multiclass count for --gd."""
    from olcli.engine.records import (C_LOSS, H_WEIGHT, S_EXAMPLES, S_FEATURES, S_LABEL_SQUARES, S_LABEL_SUM,
                                      S_LABELED, S_NEGATIVE, S_OTHER_LABELS, S_POSITIVE, S_UNLABELED_WEIGHT,
                                      S_WEIGHT, new_tally)

    batch = _stream(9, 400, classes=max(multiclass.values(), default=0), loss=loss)
    counted = [S_EXAMPLES, S_WEIGHT, S_UNLABELED_WEIGHT, S_LABEL_SUM, S_LABEL_SQUARES, S_POSITIVE, S_NEGATIVE,
               S_OTHER_LABELS, S_FEATURES, S_LABELED]
    results = []
    for name in ("mix", "gd"):
        tally = new_tally(holdout_period=3)
        learner = Learner(name, loss=loss, bits=8, **multiclass)
        learner.process(batch, True, tally)
        same = np.arange(len(COUNTER_NAMES)) != C_LOSS
        results.append((tally.stats[counted], tally.holdout[H_WEIGHT], learner.model.counters[same]))
    assert np.array_equal(results[0][0], results[1][0])
    assert results[0][1] == results[1][1] > 0
    assert np.array_equal(results[0][2], results[1][2])


HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data")
FORMAT5 = os.path.join(HERE, "mix_format5")
FORMAT5_EXPECTED = json.load(open(os.path.join(FORMAT5, "expected.json")))
FORMAT5_DATA = {"a9a_logistic": "a9a_train.vw", "letter_oaa26": "letter_train.vw",
                "letter_softmax26": "letter_train.vw"}


@pytest.mark.parametrize("name", sorted(FORMAT5_EXPECTED))
def test_a_format_5_default_model_mixes_its_four_members(name, tmp_path):
    """A format-5 --mix file (no params.members: all four were mixed, --oaa too; written by
    that code, sample_data/mix_format5/make_expected.py) loads with members 4 and continues
    bit for bit as that code did; saved again it keeps members 4."""
    want = FORMAT5_EXPECTED[name]
    path = os.path.join(FORMAT5, f"{name}.olm")
    assert "members" not in model_file.read_header(open(path, "rb").read(), path)[0]["params"]
    loaded = Learner.from_model(model_file.load(path))
    assert loaded.params["members"] == 4.0
    continues_as_written(loaded, os.path.join(HERE, FORMAT5_DATA[name]), want)
    again = tmp_path / "again.olm"
    loaded.save(again)
    assert model_file.read_header(again.read_bytes(), str(again))[0]["params"]["members"] == 4.0


def test_coin_options_without_the_coin_member_are_refused():
    """--coin-alpha/--coin-beta set the coin member: with fewer than four members mixed
    (the --oaa default) they would change nothing, so they are refused by name."""
    from olcli.errors import UsageError

    with pytest.raises(UsageError, match="--coin-alpha.*--mix-members 4"):
        Learner("mix", loss="logistic", bits=8, oaa=3, alpha=2.0)
    with pytest.raises(UsageError, match="--coin-beta.*--mix-members 4"):
        Learner("mix", loss="logistic", bits=8, members=3, beta=0.5)
    assert Learner("mix", loss="logistic", bits=8, oaa=3, alpha=2.0, members=4).params["alpha"] == 2.0


def test_a_format_5_file_naming_members_is_refused(tmp_path):
    """members came with format 6: an older file that names it was not written by olcli."""
    m = Learner("mix", loss="logistic", bits=8)
    m.process(_stream(7, 20), True)
    header = m.model.header()
    header["format_version"] = 5
    with pytest.raises(ModelError, match="format 6"):
        model_file.validate(header, "crafted.olm")


@pytest.mark.parametrize("value", [0, 5, 2.5, -1, 3.9999999999])
def test_members_outside_one_to_four_are_refused(value):
    from olcli.errors import UsageError

    with pytest.raises(UsageError, match="members"):
        Learner("mix", loss="logistic", bits=8, members=value)


def test_mix_members_on_the_command_line(tmp_path):
    """--mix-members N is the default's option: recorded in the model, refused with another
    learner, and a continued model keeps its own (a different N is refused by name)."""
    import subprocess
    import sys

    data = os.path.join(HERE, "letter_train.vw")
    olcli = [sys.executable, "-m", "olcli"]
    model = tmp_path / "m.olm"
    done = subprocess.run(olcli + ["train", data, "--oaa", "26", "-b", "10", "--quiet", "-f", str(model)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert model_file.read_header(model.read_bytes(), str(model))[0]["params"]["members"] == 2.0
    done = subprocess.run(olcli + ["train", data, "--oaa", "26", "-b", "10", "--quiet", "-i", str(model),
                                   "--mix-members", "4"], capture_output=True, text=True)
    assert done.returncode == 2 and "members" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run(olcli + ["train", data, "--gd", "--quiet", "--mix-members", "2"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "--mix-members" in done.stderr and "Traceback" not in done.stderr
