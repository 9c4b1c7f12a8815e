"""``olcli vw --cb_explore_adf`` / ``--cb_adf`` end to end (olcli/cb_run.py): the CLI against the oracle
tests/naive_cb.py on generated ADF data, VW 9.11.9's printed table, summary and -p on VW's cb_test.ldf
(sample_data/cb), -f/-i resume against one continuous run, pipes, bad input and refusals."""

import random
import re
from pathlib import Path

import pytest

import naive_cb as nc

CB = Path(__file__).resolve().parent.parent / "sample_data" / "cb"
LR = 0.1
PLAIN = ["--sgd", "--power_t", "0", "-l", str(LR)]   # VW's plain update, the oracle's VWPlainSGD(LR)


def value(rnd):
    """A feature value in ±[0.05, 1] (never 0: a zero-valued feature is not a feature, in VW and olcli)."""
    return round(rnd.choice((-1, 1)) * rnd.uniform(0.05, 1.0), 3)


def generated(n=30, seed=11, unlabelled_every=6):
    """ADF text: n events of 2-4 actions, distinct features per line, costs in [-1, 2], p in [0.2, 1];
    returns (text, events as the oracle's Event with named features)."""
    rnd = random.Random(seed)
    blocks, events = [], []
    for i in range(n):
        k = rnd.randint(2, 4)
        shared = {f"s{j}": value(rnd) for j in rnd.sample(range(6), 2)}
        actions = [{f"x{j}": value(rnd) for j in rnd.sample(range(8), 3)} for _ in range(k)]
        chosen = None if i % unlabelled_every == unlabelled_every - 1 else rnd.randrange(k)
        cost, prob = round(rnd.uniform(-1, 2), 3), round(rnd.uniform(0.2, 1.0), 3)
        lines = ["shared |u " + " ".join(f"{f}:{v}" for f, v in shared.items())]
        for a, feats in enumerate(actions):
            label = f"{a}:{cost}:{prob} " if a == chosen else ""
            lines.append(label + "|a " + " ".join(f"{f}:{v}" for f, v in feats.items()))
        blocks.append("\n".join(lines))
        events.append(nc.Event({"u^" + f: v for f, v in shared.items()},
                               [{"a^" + f: v for f, v in feats.items()} for feats in actions],
                               chosen, cost if chosen is not None else 0.0, prob if chosen is not None else 0.0))
    return "\n\n".join(blocks) + "\n\n", events


def read_pmfs(path):
    """-p of --cb_explore_adf: one 'a:p,a:p,...' line per event, then a blank line."""
    text = Path(path).read_text()
    assert text.endswith("\n\n")
    return [[(int(a), float(p)) for a, p in (w.split(":") for w in block.split(","))]
            for block in text.strip("\n").split("\n\n")]


def summary(err):
    def get(name):
        m = re.search(rf"^{name} = (.+)$", err, re.M)
        return m.group(1) if m else None
    return get("number of examples"), get("total feature number"), get("average loss")


ORACLE_RULES = [
    (["--epsilon", "0.1"], ("epsilon", 0.1)),
    (["--softmax", "--lambda", "2"], ("softmax", 2.0, 0.0)),
    (["--squarecb"], ("squarecb", 10.0, 0.0)),
    (["--first", "3", "--epsilon", "0.1"], ("first", 3, 0.1)),
    (["--bag", "3"], ("bag", 3, 0.0)),
]


def vw_poisson_draws(seed=0):
    """VW's bag draws: merand48 on the random state (seed 0) through the Poisson(1) CDF of bs::weight_gen."""
    state = [seed]

    def draws(_member):
        u, state[0] = nc.merand48(state[0])
        return _poisson(u)
    return draws


def _poisson(u):
    # Poisson(1) CDF, the table of VW's bs::weight_gen (written out here, not taken from olcli)
    cdf, term, k = 0.0, 0.36787944117144233, 0
    while k < 8:
        cdf += term
        if u <= cdf:
            return k
        k += 1
        term /= k
    return 8


@pytest.mark.parametrize("cb_type", ["mtr", "ips", "dm", "dr"])
@pytest.mark.parametrize("rule_args, oracle_rule", ORACLE_RULES)
def test_cli_matches_the_oracle(cli, rule_args, oracle_rule, cb_type):
    """Every event's PMF (-p) and the summary's average loss, examples and features against the oracle."""
    if oracle_rule[0] == "squarecb" and cb_type != "mtr":
        pytest.skip("squarecb learns mtr only")
    text, events = generated()
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", "--cb_explore_adf", *rule_args, "--cb_type", cb_type, "-d", "d.txt", "--noconstant",
                       "-p", "p.txt", *PLAIN)
    assert code == 0, err
    rng = nc.LabelRange()
    if oracle_rule[0] == "bag":
        oracle_rule = oracle_rule + (vw_poisson_draws(),)
    oracle = nc.CbExploreAdf(oracle_rule, cb_type=cb_type, make_regressor=lambda: nc.VWPlainSGD(LR, rng),
                             constant=False)
    pmfs = read_pmfs("p.txt")
    assert len(pmfs) == len(events)
    losses = []
    for i, (event, pmf) in enumerate(zip(events, pmfs)):
        opmf, loss = oracle.step(event)
        losses.append(loss)
        assert [a for a, _ in pmf] == [a for a, _ in opmf], f"event {i}"
        assert [p for _, p in pmf] == pytest.approx([p for _, p in opmf], rel=1e-5, abs=1e-6), f"event {i}"
    labelled = [loss for loss, e in zip(losses, events) if e.labelled]
    features = sum(len(e.shared) * len(e.actions) + sum(len(a) for a in e.actions) for e in events)
    n, f, avg = summary(err)
    assert (int(n), int(f)) == (len(events), features)
    assert float(avg) == pytest.approx(sum(labelled) / len(labelled), abs=1e-6)


@pytest.mark.parametrize("cb_type", ["mtr", "ips", "dm", "dr"])
def test_cb_adf_matches_the_oracle(cli, cb_type):
    """--cb_adf: -p is the best action's position per event (ranked before learning); average loss the
    oracle's (IPS, or DR with dr); total feature number counts the shared line once."""
    text, events = generated(seed=4)
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", "--cb_adf", "--cb_type", cb_type, "-d", "d.txt", "--noconstant", "-p", "p.txt", *PLAIN)
    assert code == 0, err
    rng = nc.LabelRange()
    oracle = nc.CbAdf(cb_type, nc.VWPlainSGD(LR, rng), nc.VWPlainSGD(LR, rng) if cb_type == "dr" else None,
                      constant=False)
    best = [int(b) for b in Path("p.txt").read_text().strip("\n").split("\n\n")]
    losses = []
    for i, event in enumerate(events):
        scores = oracle.learn(event)
        assert best[i] == nc.rank(scores)[0][0], f"event {i}"
        if event.labelled:
            losses.append(nc.loss_cb_adf(event, scores, oracle.last_dr))
    n, f, avg = summary(err)
    features = sum(len(e.shared) + sum(len(a) for a in e.actions) for e in events)
    assert (int(n), int(f)) == (len(events), features)
    assert float(avg) == pytest.approx(sum(losses) / len(losses), abs=1e-6)


# VW 9.11.9's stderr and -p for `--cb_explore_adf --epsilon 0.1 -d cb_test.ldf --noconstant -p P` (same file as
# sample_data/cb/cb_test.ldf; run 2026-11-27): the table rows and the summary lines.
VW_TABLE = """\
average  since         example        example        current        current  current
loss     last          counter         weight          label        predict features
0.666667 0.666667            1            1.0        0:1:0.5         0:0.33       15
0.333333 0.000000            2            2.0        1:0:0.5         1:0.95        6

finished run
number of examples = 3
weighted example sum = 3.000000
weighted label sum = 0.000000
average loss = 0.333333
total feature number = 27
"""
VW_PMFS = "0:0.333333,1:0.333333,2:0.333333\n\n1:0.95,0:0.05\n\n1:0.95,0:0.05\n\n"
# VW 9.11.9, `--cb_adf -d cb_test.ldf -p P` (constant on)
VW_ADF_TABLE = """\
2.000000 2.000000            1            1.0        0:1:0.5            0:0       18
1.000000 0.000000            2            2.0        1:0:0.5         1:0.11        8
"""
VW_ADF_SUMMARY = "number of examples = 3\nweighted example sum = 3.000000\nweighted label sum = 0.000000\n" \
                 "average loss = 1.000000\ntotal feature number = 31\n"


def test_table_summary_and_predictions_as_vw_prints_them(cli):
    code, out, err = cli("vw", "--cb_explore_adf", "--epsilon", "0.1", "-d", CB / "cb_test.ldf", "--noconstant",
                         "-p", "p.txt")
    assert code == 0, err
    assert err.endswith(VW_TABLE), err
    assert "Input label = CB\nOutput pred = ACTION_PROBS\n" in err
    assert Path("p.txt").read_text() == VW_PMFS
    assert out == b""
    code, out, err = cli("vw", "--cb_adf", "-d", CB / "cb_test.ldf", "-p", "q.txt")
    assert code == 0, err
    assert VW_ADF_TABLE in err and err.endswith(VW_ADF_SUMMARY), err
    assert Path("q.txt").read_text() == "0\n\n1\n\n1\n\n"


# VW 9.11.9 (default learner) on generated(n=40, seed=21) with --noconstant, run 2026-11-27:
# (average loss, total feature number); the interaction features are counted as VW counts them.
VW_INTERACTIONS = [
    (["--epsilon", "0.1", "-q", "ua"], "0.982049", "1287"),
    (["--epsilon", "0.1", "-q", "ua", "-q", "uu"], "0.861919", "1638"),
    (["--squarecb", "-q", "ua"], "1.017285", "1287"),
    (["--squarecb", "-q", "ua", "-q", "uu"], "0.912065", "1638"),
    (["--bag", "2", "-q", "ua"], "0.875576", "1287"),
    (["--bag", "2", "-q", "ua", "-q", "uu"], "1.064748", "1638"),
]


@pytest.mark.parametrize("args, loss, features", VW_INTERACTIONS)
def test_interactions_as_vw(cli, args, loss, features):
    """-q on a CB line: the ranking uses the kernel's raw scores of the crossed features (VW's numbers)."""
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", "--cb_explore_adf", *args, "-d", "d.txt", "--noconstant")
    assert code == 0, err
    assert summary(err) == ("40", features, loss)


# VW 9.11.9 (default learner, constant on) on generated(n=40, seed=21): dr and bag keep weight copies, each
# with its own constant feature
VW_COPIES = [
    (["--cb_explore_adf", "--bag", "3"], "0.842012", "702"),
    (["--cb_explore_adf", "--cb_type", "dr"], "1.201605", "702"),
    (["--cb_explore_adf", "--bag", "2", "--cb_type", "dr"], "0.918931", "702"),
    (["--cb_explore_adf", "--bag", "4", "--epsilon", "0.1"], "1.032039", "702"),
]


@pytest.mark.parametrize("args, loss, features", VW_COPIES)
def test_weight_copies_with_the_constant_as_vw(cli, args, loss, features):
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", *args, "-d", "d.txt", "-f", "m")
    assert code == 0, err
    assert summary(err) == ("40", features, loss)
    code, _, err = cli("vw", "--cb_explore_adf", "-t", "-i", "m", "-d", "d.txt")   # the model keeps the copies
    assert code == 0, err
    code, _, err = cli("vw", "--cb_explore_adf", "-t", "-i", "m", "-d", "d.txt", "--noconstant")
    assert code == 2 and "trained with the constant feature" in err


def test_cb_adf_dr_with_the_constant_as_vw(cli):
    # VW 9.11.9: `--cb_adf --rank_all -d cb_test.ldf --cb_type dr` prints 3 / 31 / 0.931410
    code, _, err = cli("vw", "--cb_adf", "--rank_all", "-d", CB / "cb_test.ldf", "--cb_type", "dr")
    assert code == 0, err
    assert summary(err) == ("3", "31", "0.931410")


# VW 9.11.9 with --coin / --ftrl as the base learner, generated(n=40, seed=21), constant on
VW_LEARNERS = [
    (["--coin"], "1.152411"), (["--coin", "--epsilon", "0.2"], "1.104027"), (["--ftrl"], "1.289707"),
    (["--coin", "--bag", "2"], "0.918254"), (["--coin", "--cb_type", "dr", "--softmax"], "0.853041"),
]


@pytest.mark.parametrize("args, loss", VW_LEARNERS)
def test_coin_and_ftrl_base_learners_as_vw(cli, args, loss):
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", "--cb_explore_adf", *args, "-d", "d.txt")
    assert code == 0, err
    assert summary(err)[2] == loss


def test_quiet_prints_nothing(cli):
    code, out, err = cli("vw", "--cb_explore_adf", "-d", CB / "cb_test.ldf", "--quiet")
    assert (code, out, err) == (0, b"", "")


def test_standard_input_equals_the_file(cli):
    text, _ = generated(seed=8)
    Path("d.txt").write_text(text)
    code, _, err_file = cli("vw", "--cb_explore_adf", "--softmax", "-d", "d.txt", "-p", "a.txt")
    assert code == 0, err_file
    code, _, err_pipe = cli("vw", "--cb_explore_adf", "--softmax", "-p", "b.txt", stdin=text.encode())
    assert code == 0, err_pipe
    assert Path("a.txt").read_text() == Path("b.txt").read_text()
    assert summary(err_file) == summary(err_pipe)


@pytest.mark.parametrize("rule_args", [["--epsilon", "0.1"], ["--squarecb"], ["--first", "20"], ["--bag", "2"],
                                       ["--cb_type", "dr"], ["--cb_type", "ips", "--softmax"]])
def test_resume_equals_one_continuous_run(cli, rule_args):
    """-f after the first half, -i for the second: the second half's PMFs and a final test pass equal one
    run over the whole stream (the model keeps squarecb's counter, first's tau, bag's random state, mtr's
    totals)."""
    text, _ = generated(n=40, seed=21)
    blocks = text.strip("\n").split("\n\n")
    Path("all.txt").write_text(text)
    Path("a.txt").write_text("\n\n".join(blocks[:17]) + "\n\n")
    Path("b.txt").write_text("\n\n".join(blocks[17:]) + "\n\n")
    base = ["vw", "--cb_explore_adf", *rule_args, "--noconstant"]
    assert cli(*base, "-d", "all.txt", "-p", "whole.p", "-f", "whole.m")[0] == 0
    code, _, err = cli(*base, "-d", "a.txt", "-p", "a.p", "-f", "half.m")
    assert code == 0, err
    code, _, err = cli("vw", "--cb_explore_adf", "--noconstant", "-i", "half.m", "-d", "b.txt", "-p", "b.p",
                       "-f", "resumed.m")
    assert code == 0, err
    assert read_pmfs("a.p") + read_pmfs("b.p") == read_pmfs("whole.p")
    for m in ("whole.m", "resumed.m"):
        code, _, err = cli("vw", "--cb_explore_adf", "--noconstant", "-t", "-i", m, "-d", "all.txt", "-p", m + ".p")
        assert code == 0, err
    assert Path("whole.m.p").read_text() == Path("resumed.m.p").read_text()


def test_testonly_learns_nothing(cli):
    text, _ = generated(seed=3)
    Path("d.txt").write_text(text)
    assert cli("vw", "--cb_explore_adf", "-d", "d.txt", "-f", "m")[0] == 0
    before = Path("m").read_bytes()
    code, _, err = cli("vw", "--cb_explore_adf", "-t", "-i", "m", "-d", "d.txt", "-p", "1.p")
    assert code == 0 and "only testing" in err
    code, _, err = cli("vw", "--cb_explore_adf", "-t", "-i", "m", "-d", "d.txt", "-p", "2.p")
    assert code == 0
    assert Path("1.p").read_text() == Path("2.p").read_text() and Path("m").read_bytes() == before


def test_bad_input_is_named_and_what_was_learned_is_kept(cli):
    """A bad event: skipped with a warning naming file, line and text, the others learned (VW's and olcli
    train's default); --strict_parse: exit 1, and the model learned before it is written."""
    text, _ = generated(n=12, seed=5)
    blocks = text.strip("\n").split("\n\n")
    good = "\n\n".join(blocks[:7]) + "\n\n"
    rest = "\n\n".join(blocks[7:]) + "\n"
    bad_line = "0:oops:0.5 |a x1:1"
    Path("bad.txt").write_text(good + "shared |u s1\n" + bad_line + "\n|a x2\n\n" + rest)
    Path("good.txt").write_text(good)
    Path("skipped.txt").write_text(good + rest)
    line = good.count("\n") + 2
    code, out, err = cli("vw", "--cb_explore_adf", "-d", "bad.txt", "-f", "m", "-p", "p")
    assert code == 0, err
    assert f"warning: skipping bad.txt, line {line}" in err and "0:oops:0.5" in err, err
    assert "number of examples = 12\n" in err and "bad examples skipped = 1\n" in err
    assert cli("vw", "--cb_explore_adf", "-d", "skipped.txt", "-p", "q")[0] == 0
    assert Path("p").read_text() == Path("q").read_text()

    code, out, err = cli("vw", "--cb_explore_adf", "-d", "bad.txt", "-f", "m", "-p", "p", "--strict_parse")
    assert code == 1
    assert f"bad.txt, line {line}" in err and "0:oops:0.5" in err, err
    assert "written to m" in err and "Traceback" not in err
    assert len(read_pmfs("p")) == 7
    assert cli("vw", "--cb_explore_adf", "-d", "good.txt", "-f", "g")[0] == 0
    for m in ("m", "g"):
        assert cli("vw", "--cb_explore_adf", "-t", "-i", m, "-d", "good.txt", "-p", m + ".probe")[0] == 0
    assert Path("m.probe").read_text() == Path("g.probe").read_text()


def test_a_bad_feature_is_named_by_its_event(cli):
    Path("d.txt").write_text("shared |u a\n0:1:0.5 |a x\n|a:zz y\n\n|a x\n0:0:0.5 |a y\n\n")
    code, _, err = cli("vw", "--cb_adf", "-d", "d.txt", "--strict_parse")
    assert code == 1 and "d.txt, the event at line 1" in err and "Traceback" not in err, err
    code, _, err = cli("vw", "--cb_adf", "-d", "d.txt")
    assert code == 0 and "number of examples = 1\n" in err, err


def test_two_costs_in_one_event_are_refused_with_the_line(cli):
    Path("d.txt").write_text("shared |u a\n0:1:0.5 |a x\n1:0:0.5 |a y\n\n")
    code, _, err = cli("vw", "--cb_adf", "-d", "d.txt", "--strict_parse")
    assert code == 1 and "d.txt, line" in err and "Traceback" not in err, err


@pytest.mark.parametrize("args, message", [
    (["--cb_explore_adf", "--cover", "3"], "--cover: not supported"),
    (["--cb_explore_adf", "--audit"], "--audit: not supported on a contextual-bandit line yet"),
    (["--cb_adf", "--cb_type", "sm"], "--cb_type sm: not supported; olcli's cb_types: mtr, ips, dm, dr"),
    (["--cb_explore_adf", "--regcb"], "--regcb: not supported; olcli vw runs --cb_explore_adf"),
    (["--cb_explore_adf", "--rank_all"], "--rank_all: an option of --cb_adf"),
    (["--cb_explore_adf", "--loss_function", "logistic"], "--loss_function logistic: not supported"),
    (["--cb_explore_adf", "--softmax", "--squarecb"], "--softmax and --squarecb: one exploration rule at a time"),
    (["--cb_adf", "--epsilon", "0.1"], "--epsilon: an exploration option; it needs --cb_explore_adf"),
])
def test_refused_by_name_before_anything_is_written(cli, args, message):
    code, out, err = cli("vw", *args, "-d", CB / "cb_test.ldf", "-f", "m", "-p", "p")
    assert code == 2
    assert err.startswith("Error: " + message) and len(err.strip().splitlines()) == 1, err
    assert not Path("m").exists() and not Path("p").exists() and out == b""


def test_a_cb_model_brings_its_reduction(cli):
    # VW reads a model's reductions from the model (suite test 166: `-t -i cb_dm.reg` after `--cb 2 --cb_type dm`).
    # VW 9.11.9, `--cb 2 --cb_type dm -d rcv1_raw_cb_small_20.vw -f m`, then `-d ... -t -i m -p p`: 20 / 3552 /
    # 0.000000, and the same -p lines as with --cb 2 given again
    data = CB / "rcv1_raw_cb_small_20.vw"
    assert cli("vw", "--cb", "2", "--cb_type", "dm", "-d", data, "-f", "m", "--quiet")[0] == 0
    code, _, err = cli("vw", "-d", data, "-t", "-i", "m", "-p", "p")
    assert code == 0 and summary(err) == ("20", "3552", "0.000000"), err
    code, _, again = cli("vw", "-d", data, "-t", "--initial_regressor=m", "--cb", "2", "-p", "p2")
    assert code == 0 and summary(again) == summary(err)
    assert Path("p").read_text() == Path("p2").read_text() and Path("p").read_text().strip()
    # olcli train takes the same words (issue 29: a line olcli vw runs runs under olcli train too)
    code, _, train = cli("train", "-d", data, "-t", "-i", "m", "-p", "p3")
    assert code == 0 and summary(train) == summary(err), train
    assert Path("p3").read_text() == Path("p").read_text()


def test_a_plain_model_is_not_a_cb_model(cli):
    Path("r.txt").write_text("1 | a\n0 | b\n")
    assert cli("train", "r.txt", "-f", "plain.m")[0] == 0
    code, _, err = cli("vw", "--cb_explore_adf", "-i", "plain.m", "-d", CB / "cb_test.ldf")
    assert code == 1 and "not a contextual-bandit model" in err, err


# VW 9.11.9 on sample_data/cb's Decision Service JSON files (run 2026-11-27): examples, features, average loss
VW_DSJSON = [
    (["--cb_explore_adf", "--dsjson", "-d", "dsjson_cb_3.json"], ("3", "120", "-0.098039"),
     "-0.14705 -0.29411            2            2.0      0:-1:0.85         0:0.25       40\n"),
    (["--cb_adf", "--dsjson", "-d", "cb_features_w_zero_vals.dsjson"], ("2", "6", "-2.000000"),
     "-2.00000 -2.00000            2            2.0       0:-1:0.5        0:-0.39        2\n"),
    (["--cb_explore_adf", "--dsjson", "-d", "cb_simple.json"], ("1", "6", "-1.000000"),
     "-1.00000 -1.00000            1            1.0       1:-1:0.5          0:0.5        6\n"),
]


@pytest.mark.parametrize("args, numbers, row", VW_DSJSON)
def test_dsjson_as_vw(cli, monkeypatch, args, numbers, row):
    monkeypatch.chdir(CB)   # the files are read, nothing is written
    code, _, err = cli("vw", *args)
    assert code == 0, err
    assert summary(err) == numbers and row in err, err


# VW 9.11.9, `--cb_explore_adf -P 10 --noconstant` on generated(n=40, seed=21): the table (its label column
# writes cost and probability with 2 significant digits, the loss columns are cut to 8 characters)
VW_P10 = """\
0.517503 0.517503           10           10.0       0:1:0.35         1:0.97       10
1.335257 2.255230           20           20.0     2:1.5:0.31         2:0.96       20
1.385973 1.493745           30           30.0        unknown         1:0.97       10
1.159618 0.530853           40           40.0      1:1.2:0.2         1:0.97       15

finished run
number of examples = 40
weighted example sum = 40.000000
weighted label sum = 0.000000
average loss = 1.159618
total feature number = 585
"""


def test_progress_interval_as_vw(cli):
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", "--cb_explore_adf", "-P", "10", "--noconstant", "-d", "d.txt")
    assert code == 0, err
    assert err.endswith(VW_P10), err


def test_passes_as_vw(cli):
    """VW 9.11.9, `--cb_adf -c -k --passes 3 --holdout_off --noconstant` on generated(n=40, seed=21)."""
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", "--cb_adf", "-c", "-k", "--passes", "3", "--holdout_off", "--noconstant", "-d", "d.txt")
    assert code == 0, err
    assert err.endswith("number of examples per pass = 40\npasses used = 3\nweighted example sum = 120.000000\n"
                        "weighted label sum = 0.000000\naverage loss = 1.016003\ntotal feature number = 1293\n"), err
    code, _, err = cli("vw", "--cb_adf", "--passes", "3", "--noconstant", "-d", "d.txt")
    assert code == 2 and "--passes without --holdout_off" in err


def test_rank_all_writes_every_score(cli):
    """--cb_adf --rank_all -p: 'action:score,...' ranked; VW 9.11.9's first events on generated(n=40, seed=21)
    (VW scores in float32: compared to 1e-5)."""
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("vw", "--cb_adf", "--rank_all", "--noconstant", "-d", "d.txt", "-p", "p.txt")
    assert code == 0, err
    vw = ["0:0,1:0", "3:-0.010232,0:0,1:0,2:0.172403", "0:0.067188,1:0.335438", "0:-0.032494,1:-0.011917,2:0.130681",
          "1:-0.370547,3:-0.326352,0:0.481855,2:0.549816"]
    got = Path("p.txt").read_text().split("\n\n")[:5]
    for ours, theirs in zip(got, vw):
        ours, theirs = [w.split(":") for w in ours.split(",")], [w.split(":") for w in theirs.split(",")]
        assert [a for a, _ in ours] == [a for a, _ in theirs]
        assert [float(s) for _, s in ours] == pytest.approx([float(s) for _, s in theirs], abs=2e-6)
    assert summary(err) == ("40", "431", "1.219638")


def test_olcli_train_takes_cb_lines(cli):
    """olcli train --cb-explore-adf: olcli's spellings; --gd is VW's learner (VW 9.11.9 prints average loss
    1.159618 and 585 features for `--cb_explore_adf --noconstant` on generated(n=40, seed=21)); without an
    algorithm flag the base learner is olcli's default, kept in the model for -i."""
    Path("d.txt").write_text(generated(n=40, seed=21)[0])
    code, _, err = cli("train", "--cb-explore-adf", "--gd", "--noconstant", "d.txt", "--final-model", "gd.olm")
    assert code == 0, err
    assert summary(err) == ("40", "585", "1.159618")
    code, _, err = cli("train", "--cb-explore-adf", "--softmax", "d.txt", "-f", "default.olm", "-p", "p.txt")
    assert code == 0, err
    assert len(read_pmfs("p.txt")) == 40
    from olcli import commands
    from olcli.engine import registry

    model = commands.load_learner("default.olm").model
    assert model.algorithm == registry.DEFAULT_ALGORITHM and model.cb["settings"]["rule"] == "softmax"
    code, _, err = cli("vw", "--cb_explore_adf", "-t", "-i", "default.olm", "-d", "d.txt")
    assert code == 0, err
    code, _, err = cli("train", "--cb-adf", "--ftrl", "--adaptive", "d.txt")
    assert code == 2 and "--adaptive: a VW gd switch" in err


def single_line_stream(n=300, seed=3):
    """--cb 3 text: one example per line, label action:cost:probability, every 7th unlabelled."""
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        feats = " ".join(f"w{j}:{round(rnd.uniform(0.1, 1), 3)}" for j in rnd.sample(range(20), 4))
        if i % 7 == 6:
            lines.append(f"| {feats}")
        else:
            label = f"{rnd.randint(1, 3)}:{round(rnd.uniform(-1, 2), 3)}:{round(rnd.uniform(0.2, 1), 3)}"
            lines.append(f"{label} |x {feats}")
    return "\n".join(lines) + "\n"


# VW 9.11.9, `--cb 3 [options]` on single_line_stream() (run 2026-11-27): VW 9 runs --cb K as --cb_adf over K
# action copies of each line at action-specific indices (cb_to_cb_adf), default cb_type mtr
VW_CB3 = [
    ([], "0.294862", "4500"), (["--cb_type", "ips"], "0.354441", "4500"), (["--cb_type", "dm"], "0.398713", "4500"),
    (["--noconstant"], "0.362851", "3600"), (["--cb_type", "dr", *PLAIN], "0.319515", "4500"),
    (["--cb_type", "dr", "--noconstant", *PLAIN], "0.338448", "3600"),
]


@pytest.mark.parametrize("args, loss, features", VW_CB3)
def test_cb_k_as_vw(cli, args, loss, features):
    Path("d.txt").write_text(single_line_stream())
    code, _, err = cli("vw", "--cb", "3", *args, "-d", "d.txt", "-p", "p.txt")
    assert code == 0, err
    assert summary(err) == ("300", features, loss)
    best = Path("p.txt").read_text().split("\n\n")   # VW's -p: the best action, 0-based, then a blank line
    assert best[-1] == "" and len(best) == 301 and set(best[:-1]) <= {"0", "1", "2"}


def test_cb_k_on_vws_files(cli):
    # VW 9.11.9: `--cb 4 -d cb_multi_cost.dat` 5 / 80 / 2.000000 (suite line 338); `--cb 2 -d
    # rcv1_raw_cb_small_20.vw` 20 / 3552 / 0.500000 and with `--cb_type ips --ngram 2 --skips 4 -b 24` 20 / 20512 / 0.5
    code, _, err = cli("vw", "--cb", "4", "-d", CB / "cb_multi_cost.dat")
    assert code == 0 and summary(err) == ("5", "80", "2.000000"), err
    code, _, err = cli("vw", "--cb", "2", "-d", CB / "rcv1_raw_cb_small_20.vw")
    assert code == 0 and summary(err) == ("20", "3552", "0.500000"), err
    code, _, err = cli("vw", "--cb", "2", "--cb_type", "ips", "--ngram", "2", "--skips", "4", "-b", "24", "-d",
                       CB / "rcv1_raw_cb_small_20.vw")
    assert code == 0 and summary(err) == ("20", "20512", "0.500000"), err
    code, _, err = cli("vw", "--cb", "2", "-q", "xx", "-d", CB / "rcv1_raw_cb_small_20.vw")
    assert code == 2 and "-q with --cb K: not supported yet" in err
