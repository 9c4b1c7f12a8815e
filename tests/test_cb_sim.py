"""``olcli vw --cbify K`` and ``--cb K --eval`` (olcli/cb_sim.py), and the CB run's JSON report: the CLI
against the oracle tests/naive_cb.py (``cbify``, ``evaluate``) step by step on generated data, and VW
9.11.9's printed table, summary and -p on VW's own files (sample_data/cb)."""

import json
import math
import random
import re
from pathlib import Path

import pytest

import naive
import naive_cb as nc
from olcli import cb_sim

CB = Path(__file__).resolve().parent.parent / "sample_data" / "cb"
LR = 0.05
PLAIN = ["--sgd", "--power_t", "0", "-l", str(LR)]   # VW's plain update, the oracle's VWPlainSGD(LR)
CONSTANT = 11650396 & ((1 << 18) - 1)
POISSON_CDF = (0.3678794411714423, 0.7357588823428846, 0.9196986029286058, 0.9810118431238462,
               0.9963401531726563, 0.9994058151824183, 0.9999167588507120, 0.9999897508033254)


def summary(err):
    def get(name):
        m = re.search(rf"^{name} = (.+)$", err, re.M)
        return m.group(1) if m else None
    return get("number of examples"), get("total feature number"), get("average loss")


def multiclass_stream(n=80, k=4, seed=2):
    """Multiclass text (labels 1..k, a few named features each, every 9th line unlabelled) and the oracle's
    examples: (label, {hashed index: value} with VW's constant index)."""
    rnd = random.Random(seed)
    lines, examples = [], []
    for i in range(n):
        label = rnd.randint(1, k)
        feats = {f"t{j}": round(rnd.uniform(0.1, 1.0), 3) for j in rnd.sample(range(12), 3)}
        feats[f"c{label}"] = 1.0 if rnd.random() < 0.7 else 0.5     # a feature telling the class, mostly
        text = " ".join(f"{f}:{v}" for f, v in feats.items())
        fd = {CONSTANT: 1.0}
        for f, v in feats.items():
            idx = naive.vw_strings_index(b"f", f.encode(), 18)
            fd[idx] = fd.get(idx, 0.0) + v
        unlabelled = i % 9 == 8
        lines.append(("" if unlabelled else f"{label} ") + f"|f {text}")
        examples.append((None if unlabelled else label, fd))
    return "\n".join(lines) + "\n", examples


def placed_copies(width):
    """VW's cbify placement of an example's hashed indices for each action, with ``width`` weight copies per
    action below cbify (dr: 2, bag B: B): the oracle keeps each copy in its own regressor."""
    def copies(features, k):
        out = []
        for a in range(k):
            f = {}
            for i, v in features.items():
                j = nc.cbify_action_index(i, a, k, width)
                f[j] = f.get(j, 0.0) + v
            out.append(f)
        return out
    return copies


def oracle_cbify(examples, k, rule, cb_type="mtr", width=1):
    """The oracle's --cbify: sampled actions (1-based), the 0/1 losses of the labelled examples."""
    rng = nc.LabelRange()
    explorer = nc.CbExploreAdf(rule, cb_type=cb_type, make_regressor=lambda: nc.VWPlainSGD(LR, rng), constant=False)
    copies = placed_copies(width)
    chosen, losses = [], []
    for n, (label, feats) in enumerate(examples):
        actions = copies(feats, k)
        pmf = explorer.pmf(nc.Event({}, actions))
        action, p = pmf[nc.sample_after_normalizing(nc.VW_APP_SEED + n, [q for _, q in pmf])]
        chosen.append(action + 1)
        if label is not None:
            explorer.learn(nc.Event({}, actions, action, 0.0 if action + 1 == label else 1.0, p))
            losses.append(float(action + 1 != label))
    return chosen, losses


def vw_poisson_draws():
    state = [0]

    def draws(_member):
        u, state[0] = nc.merand48(state[0])
        return next((i for i, c in enumerate(POISSON_CDF) if u <= c), 8)
    return draws


def test_the_sampling_seed_is_vws_hash_of_vw():
    assert cb_sim.VW_APP_SEED == nc.VW_APP_SEED == naive.murmur3_32(b"vw", 0)


def test_sampling_is_the_oracles():
    rnd = random.Random(5)
    for seed in range(300):
        probs = [rnd.random() for _ in range(rnd.randint(1, 6))]
        probs[rnd.randrange(len(probs))] = 0.0
        assert cb_sim.sample_index(cb_sim.VW_APP_SEED + seed, probs) == nc.sample_after_normalizing(
            cb_sim.VW_APP_SEED + seed, probs)
    assert cb_sim.sample_index(1, [0.0, 0.0]) == 0


CBIFY_RULES = [
    (["--epsilon", "0.1"], ("epsilon", 0.1), "mtr", 1),
    (["--squarecb"], ("squarecb", 10.0, 0.0), "mtr", 1),
    (["--softmax", "--lambda", "3"], ("softmax", 3.0, 0.0), "mtr", 1),
    (["--first", "5"], ("first", 5, 0.0), "mtr", 1),
    (["--epsilon", "0.1", "--cb_type", "dr"], ("epsilon", 0.1), "dr", 2),
    (["--epsilon", "0.1", "--cb_type", "ips"], ("epsilon", 0.1), "ips", 1),
    (["--bag", "2"], ("bag", 2, 0.0), "mtr", 2),
]


@pytest.mark.parametrize("args, rule, cb_type, width", CBIFY_RULES)
def test_cbify_matches_the_oracle(cli, args, rule, cb_type, width):
    """Every sampled action (-p), the average loss (0/1 loss of the played actions) and the feature count
    against the oracle, with VW's plain learner; the dr cost model and bag's members are weight copies at
    index offsets inside each action's block, as VW places them."""
    k = 4
    text, examples = multiclass_stream(k=k)
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", "--cbify", k, "--cb_explore_adf", *args, "-d", "d.txt", "-p", "p.txt", *PLAIN)
    assert code == 0, err
    if rule[0] == "bag":
        rule = rule + (vw_poisson_draws(),)
    chosen, losses = oracle_cbify(examples, k, rule, cb_type, width)
    assert [int(a) for a in Path("p.txt").read_text().split("\n")[:-1]] == chosen
    n, f, avg = summary(err)
    features = sum(len(fd) for _, fd in examples)
    assert (int(n), int(f)) == (len(examples), features)
    assert float(avg) == pytest.approx(sum(losses) / len(losses), abs=1e-6)


def test_cbify_costs_loss0_loss1_change_learning_not_the_reported_loss(cli):
    """--loss0/--loss1 are the costs learned (the oracle learns them too); the average loss stays the 0/1
    miss rate, as VW's update_stats_multiclass_label counts it."""
    k = 4
    text, examples = multiclass_stream(k=k, seed=9)
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", "--cbify", k, "--softmax", "--lambda", "2", "--loss0", "-1", "--loss1", "2", "-d",
                       "d.txt", "-p", "p.txt", *PLAIN)
    assert code == 0, err
    rng = nc.LabelRange()
    x = nc.CbExploreAdf(("softmax", 2.0, 0.0), make_regressor=lambda: nc.VWPlainSGD(LR, rng), constant=False)
    chosen, misses = [], []
    for n, (label, feats) in enumerate(examples):
        actions = placed_copies(1)(feats, k)
        pmf = x.pmf(nc.Event({}, actions))
        action, p = pmf[nc.sample_after_normalizing(nc.VW_APP_SEED + n, [q for _, q in pmf])]
        chosen.append(action + 1)
        if label is not None:
            x.learn(nc.Event({}, actions, action, -1.0 if action + 1 == label else 2.0, p))
            misses.append(float(action + 1 != label))
    assert [int(a) for a in Path("p.txt").read_text().split()] == chosen
    assert float(summary(err)[2]) == pytest.approx(sum(misses) / len(misses), abs=1e-6)


# VW 9.11.9, `--cbify 2 --epsilon 0.05 -d rcv1_multiclass_100.dat -p P` (run 2026-11-27)
VW_CBIFY_TABLE = """\
average  since         example        example        current        current  current
loss     last          counter         weight          label        predict features
1.000000 1.000000            1            1.0              2              1      128
0.500000 0.000000            2            2.0              2              2       44
0.500000 0.500000            4            4.0              2              2      190
0.375000 0.250000            8            8.0              1              1       34
0.187500 0.000000           16           16.0              1              1       43
0.250000 0.312500           32           32.0              2              1       47
0.265625 0.281250           64           64.0              1              1       54

finished run
number of examples = 100
weighted example sum = 100.000000
weighted label sum = 0.000000
average loss = 0.320000
total feature number = 7983
"""
VW_CBIFY_P = ("1 2 2 2 2 2 2 1 2 1 2 1 2 2 1 1 2 1 1 2 1 1 2 2 1 2 2 2 1 1 2 1 2 2 2 1 2 2 2 2 1 2 2 2 2 2 2 1 2 1 "
              "2 2 2 2 2 1 1 1 2 1 1 1 1 1 1 1 1 2 2 1 2 2 1 2 2 2 1 1 2 1 2 2 1 1 2 1 2 1 1 2 1 2 1 1 2 1 1 1 2 2")


def test_cbify_prints_vws_table_summary_and_predictions(cli):
    """VW's default learner (adaptive, normalized, invariant gd): the progress table and summary byte for
    byte, and -p (one sampled action per line), on VW's rcv1_multiclass.dat (first 100 lines). Plain
    --cbify K runs as --cbify K --cb_explore_adf, as VW 9 does."""
    for extra in ([], ["--cb_explore_adf"]):
        code, _, err = cli("vw", "--cbify", "2", *extra, "--epsilon", "0.05", "-d", CB / "rcv1_multiclass_100.dat",
                           "-p", "p.txt")
        assert code == 0, err
        assert err[err.index("average  since"):] == VW_CBIFY_TABLE
        assert Path("p.txt").read_text() == VW_CBIFY_P.replace(" ", "\n") + "\n"
    assert "Input label = MULTICLASS" in err and "cbify-adf" in err


def test_cbify_on_vws_suite_files(cli):
    # VW 9.11.9: `--cbify 10 --epsilon 0.05|--first 5|--bag 7 -d train-sets/multiclass` 10 / 20 / 0.9, 0.9, 0.7;
    # `--cbify 2 --cb_explore_adf --squarecb` and `--softmax --lambda 5 --loss0 -1 --loss1 2` on
    # rcv1_multiclass_100.dat: 100 / 7983 / 0.340000 and 0.300000
    for args, loss in ((["--epsilon", "0.05"], "0.900000"), (["--first", "5"], "0.900000"),
                       (["--bag", "7"], "0.700000")):
        code, _, err = cli("vw", "--cbify", "10", *args, "-d", CB / "multiclass")
        assert code == 0 and summary(err) == ("10", "20", loss), err
    for args, loss in ((["--cb_explore_adf", "--squarecb"], "0.340000"),
                       (["--softmax", "--lambda", "5", "--loss0", "-1", "--loss1", "2"], "0.300000")):
        code, _, err = cli("vw", "--cbify", "2", *args, "-d", CB / "rcv1_multiclass_100.dat")
        assert code == 0 and summary(err) == ("100", "7983", loss), err


def test_cbify_report_gives_the_value_with_its_interval(cli):
    """--report: the policy's value is the average loss VW prints, and its interval is value ± 1.96·s/√n of
    the per-example losses (recomputed here from -p and the labels)."""
    code, _, err = cli("vw", "--cbify", "2", "--epsilon", "0.05", "-d", CB / "rcv1_multiclass_100.dat", "-p",
                       "p.txt", "--report", "r.json")
    assert code == 0, err
    report = json.loads(Path("r.json").read_text())
    labels = [int(line.split()[0]) for line in (CB / "rcv1_multiclass_100.dat").read_text().splitlines()]
    played = [int(a) for a in Path("p.txt").read_text().split()]
    x = [float(a != y) for a, y in zip(played, labels)]
    mean = sum(x) / len(x)
    half = 1.96 * math.sqrt(sum((v - mean) ** 2 for v in x) / (len(x) - 1) / len(x))
    value = report["policy_value"]
    assert value["value"] == pytest.approx(mean) and mean == pytest.approx(0.32)
    assert value["ci95"] == pytest.approx([mean - half, mean + half])
    assert value["events"] == 100 and report["examples"] == 100 and report["total_feature_number"] == 7983
    assert "average loss = 0.320000" in err   # the summary is unchanged by --report


def test_cb_explore_adf_report(cli):
    """--cb_explore_adf's value is the IPS estimate (VW's average loss) with the interval of its per-event
    estimates p_{a*}·c/p (recomputed from -p's PMFs and the logged labels)."""
    code, _, err = cli("vw", "--cb_explore_adf", "--epsilon", "0.2", "-d", CB / "cb_test_small.ldf", "-p", "p.txt",
                       "--report", "r.json")
    assert code == 0, err
    blocks = [b for b in (CB / "cb_test_small.ldf").read_text().split("\n\n") if b.strip()]
    pmfs = [dict((int(a), float(p)) for a, p in (w.split(":") for w in b.split(",")))
            for b in Path("p.txt").read_text().strip("\n").split("\n\n")]
    x = []
    for block, pmf in zip(blocks, pmfs):
        actions = [ln for ln in block.splitlines() if not ln.startswith("shared")]
        for pos, line in enumerate(actions):
            head = line.split("|")[0].split()
            if head and head[0].count(":") == 2:
                _, c, p = head[0].split(":")
                x.append(pmf[pos] * float(c) / float(p))
    mean = sum(x) / len(x)
    half = 1.96 * math.sqrt(sum((v - mean) ** 2 for v in x) / (len(x) - 1) / len(x))
    value = json.loads(Path("r.json").read_text())["policy_value"]
    # -p writes probabilities to 6 decimals: the recomputed numbers agree to ~1e-6
    assert value["value"] == pytest.approx(mean, abs=1e-5) and value["events"] == len(x)
    assert value["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-5)
    assert float(summary(err)[2]) == pytest.approx(mean, abs=1e-5)


def eval_stream(n=60, seed=4):
    """--cb 2 --eval text (π, then the logged action:cost:probability) and the oracle's examples."""
    rnd = random.Random(seed)
    lines, examples = [], []
    for _ in range(n):
        pi, a = rnd.randint(1, 2), rnd.randint(1, 2)
        c, p = round(rnd.uniform(-0.5, 1.5), 3), round(rnd.uniform(0.2, 0.9), 3)
        feats = {f"w{j}": round(rnd.uniform(0.1, 1.0), 3) for j in rnd.sample(range(15), 4)}
        lines.append(f"{pi} {a}:{c}:{p} | " + " ".join(f"{f}:{v}" for f, v in feats.items()))
        fd = {CONSTANT: 1.0}
        for f, v in feats.items():
            idx = naive.vw_strings_index(b"", f.encode(), 18)
            fd[idx] = fd.get(idx, 0.0) + v
        examples.append((pi, a, c, p, fd))
    return "\n".join(lines) + "\n", examples


@pytest.mark.parametrize("cb_type", ["dr", "ips"])
def test_eval_matches_the_oracle(cli, cb_type):
    """--eval: -p is π per line; the average loss is the oracle's DR (cost model at VW's offsets K + i − 1,
    learned on the logged action with weight 1/p) or IPS estimate of π's cost; the report's value with
    its interval over the per-example estimates."""
    text, examples = eval_stream()
    Path("d.txt").write_text(text)
    code, _, err = cli("vw", "--cb", "2", "--eval", "--cb_type", cb_type, "-d", "d.txt", "-p", "p.txt",
                       "--report", "r.json", *PLAIN)
    assert code == 0, err
    assert [int(a) for a in Path("p.txt").read_text().split()] == [e[0] for e in examples]
    losses = nc.evaluate(examples, 2, nc.VWPlainSGD(LR, nc.LabelRange()), cb_type)
    mean = sum(losses) / len(losses)
    assert float(summary(err)[2]) == pytest.approx(mean, abs=1e-6)
    value = json.loads(Path("r.json").read_text())["policy_value"]
    half = 1.96 * math.sqrt(sum((v - mean) ** 2 for v in losses) / (len(losses) - 1) / len(losses))
    assert value["value"] == pytest.approx(mean, abs=1e-9)
    assert value["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-9)


# VW 9.11.9, `-d rcv1_cb_eval_100 --cb 2 --eval` (default learner, cb_type dr) and with --cb_type ips
VW_EVAL_TABLE = """\
average  since         example        example        current        current  current
loss     last          counter         weight          label        predict features
0.000000 0.000000            1            1.0        1:1:0.5              2       50
0.000000 0.000000            2            2.0        1:0:0.5              2      103
0.000000 0.000000            4            4.0        1:0:0.5              2      134
0.000000 0.000000            8            8.0        1:0:0.5              2      145
"""


def test_eval_on_vws_file(cli):
    """VW's IPS evaluation exactly; its DR evaluation (default learner) 0.523561, olcli's within 0.2% (VW's
    legacy path's cost model is not reproduced exactly: benchmarks/results/cb_vs_vw.md); -p is π."""
    code, _, err = cli("vw", "--cb", "2", "--eval", "--cb_type", "ips", "-d", CB / "rcv1_cb_eval_100", "-p", "p.txt")
    assert code == 0 and summary(err) == ("100", "7879", "0.560000"), err
    assert err[err.index("average  since"):].startswith(VW_EVAL_TABLE)
    assert Path("p.txt").read_text().split() == [ln.split()[0] for ln in (CB / "rcv1_cb_eval_100").read_text()
                                                 .splitlines()]
    code, _, err = cli("vw", "--cb", "2", "--eval", "-d", CB / "rcv1_cb_eval_100")
    n, f, avg = summary(err)
    assert code == 0 and (n, f) == ("100", "7879") and "cb_type = dr" in err
    assert float(avg) == pytest.approx(0.523561, rel=2e-3)


@pytest.mark.parametrize("args, message", [
    (["--cb", "2", "--eval", "--cb_type", "dm"], "direct method can not be used for evaluation"),
    (["--cb_explore_adf", "--eval"], "--eval: olcli evaluates --cb K logs only"),
    (["--cbify", "3", "--cb_adf"], "--cbify with --cb_adf"),
    (["--cb_explore_adf", "--loss0", "1"], "--loss0: an option of --cbify"),
    (["--cbify", "3", "-q", "ff"], "-q with --cbify K"),
    (["--cbify", "3", "--cbify_cs"], "--cbify_cs"),
    (["--cbify", "3", "--cover", "3"], "--cover"),
    (["--cbify", "3", "--passes", "2", "--holdout_off"], "--cbify and --eval take one pass"),
    (["--cbify", "3", "--dsjson"], "--dsjson with --cbify: not supported"),
    (["--cb", "2", "--eval", "--rank_all"], "--rank_all with --eval: not supported"),
])
def test_refused_by_name(cli, args, message):
    Path("d.txt").write_text("1 |f a\n")
    code, _, err = cli("vw", *args, "-d", "d.txt")
    assert code == 2 and message in err, err


def test_bad_lines_are_named_and_skipped(cli):
    Path("d.txt").write_text("1 |f a\n7 |f b\nx |f c\n2 |f d\n")
    code, _, err = cli("vw", "--cbify", "3", "-d", "d.txt")
    assert code == 0 and "d.txt, line 2" in err and "class 7 is outside 1..3" in err and "line 3" in err
    assert summary(err)[0] == "2" and "bad examples skipped = 2" in err
    Path("e.txt").write_text("2 1:1:0.5 | a\n1 | b\n")
    code, _, err = cli("vw", "--cb", "2", "--eval", "-d", "e.txt", "--strict_parse")
    assert code == 1 and "e.txt, line 2" in err and "--eval label" in err


def test_cbify_model_continues_as_vws(cli):
    """-f keeps the reduction (squarecb's counter, mtr's totals); -i continues it. VW 9.11.9: `--cbify 2 --squarecb
    -d rcv1_multiclass_100.dat -f M`, then `-i M -d` the same file: 100 / 7983 / 0.030000 (its example
    counter, the draws' seed, starts at 0 again in the second run, as olcli's does)."""
    data = CB / "rcv1_multiclass_100.dat"
    code, _, err = cli("vw", "--cbify", "2", "--squarecb", "-d", data, "-f", "m.olm", "--quiet")
    assert code == 0, err
    code, _, err = cli("vw", "--cbify", "2", "--squarecb", "-i", "m.olm", "-d", data)
    assert code == 0 and summary(err) == ("100", "7983", "0.030000"), err
    code, _, err = cli("vw", "--cb_explore_adf", "-i", "m.olm", "-d", CB / "cb_test.ldf")
    assert code == 2 and "trained with --cbify" in err
