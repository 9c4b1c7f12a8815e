"""VW's behaviour behind its option names: n-grams and skips, --hash_seed,
the interaction flags, --predict_only_model. Expected numbers come from VW itself:
`vw --audit` indices printed by vowpalwabbit 9.11.9, and the `total feature number`
of VW's own reference stderr files (test/train-sets/ref/*.stderr of VW's test suite)."""

import json

import numpy as np
import pytest

from olcli import model as model_file
from olcli.inputs import Chunk
from olcli.learner import Learner
from olcli.parsing import FeatureSpec, parse_chunk

try:  # the fixture that starts olcli serve (test_serve skips itself without the serve extras)
    from tests.test_serve import ask, server  # noqa: F401
except pytest.skip.Exception:
    ask = None

    @pytest.fixture
    def server():
        pytest.skip("olcli serve needs the serve extras (olcli[serve])")

LINE = "1 |a x y z |b p q:2 r |a w\n"

# `python -m vowpalwabbit ARGS -d line.dat --audit --noconstant` (9.11.9, -b 18) on LINE:
# every feature's index, sorted.
VW_AUDIT = {
    ("--ngram", "2"): [9575, 41705, 42847, 55432, 75100, 133517, 154625, 175426, 201045, 202246, 222277, 230855],
    ("--ngram", "3", "--skips", "1"): [
        9575, 28249, 41705, 42847, 55432, 57106, 75100, 111178, 128110, 133517, 137110, 146973, 154625, 175426,
        188844, 201045, 202246, 222277, 230855, 249777],
    ("--ngram", "a3", "--skips", "a2"): [
        9575, 41705, 42847, 55432, 57106, 75100, 111178, 128110, 146973, 154625, 188844, 197583, 201045, 202246,
        222277, 230855, 249777],
    ("--hash_seed", "5"): [17288, 87490, 190905, 198737, 218162, 231012, 232722],
    ("--hash_seed", "5", "--ngram", "2", "-q", "ab"): [
        4636, 6919, 17288, 18276, 26926, 28914, 35835, 42463, 47233, 52452, 65438, 66791, 67639, 87124, 87490,
        106185, 110003, 112367, 114676, 119010, 123799, 123800, 142037, 148462, 155312, 156275, 159892, 170811,
        173497, 178697, 182103, 182104, 190058, 190905, 193581, 198737, 210643, 215938, 217310, 218162, 222116,
        231012, 231229, 232722, 241467, 252766, 258904],
    ("-q", "ab", "-q", "ba", "--leave_duplicate_interactions"): [
        7880, 9575, 42847, 48420, 53047, 55432, 71516, 75100, 75404, 92299, 99680, 115605, 118425, 125619, 128883,
        129860, 131095, 134427, 154625, 155601, 160460, 163776, 164377, 167470, 186834, 192756, 196088, 202246,
        222277, 244317, 246905],
    ("-q", "::", "--leave_duplicate_interactions"): [
        1680, 7880, 9575, 27787, 31047, 35218, 42847, 48420, 48500, 53047, 55432, 60040, 64383, 71516, 75100,
        75404, 92299, 99680, 111062, 113882, 115605, 118425, 125619, 128883, 129860, 131095, 134427, 154625,
        155601, 160460, 163776, 164377, 167470, 181314, 186834, 192756, 196088, 202246, 221162, 222277, 232981,
        244317, 246905, 247838, 253394, 258255, 261571],
    ("-q", "aa", "--permutations"): [
        1680, 9575, 27787, 31047, 42847, 48500, 55432, 64383, 75100, 128803, 145837, 149114, 154625, 181314,
        199725, 202246, 221162, 222277, 226298, 232981, 238085, 247838, 253394],
    ("--cubic", "aba"): [
        2225, 9575, 24989, 28055, 33488, 36008, 39195, 42847, 45031, 46788, 55432, 74342, 75100, 78069, 87507,
        88537, 101971, 102016, 104355, 106847, 111852, 113300, 154427, 154625, 183729, 186370, 194318, 201930,
        202246, 202944, 222079, 222277, 225772, 249674, 249753, 251578, 261005],
    ("--cubic", "bab", "--permutations"): [
        5754, 9575, 15462, 28564, 37210, 39664, 42847, 51745, 53261, 55432, 63286, 66594, 75100, 77374, 86404,
        88016, 108830, 110421, 119676, 125001, 127589, 127839, 141529, 154625, 166402, 166712, 174625, 177711,
        185864, 187369, 200861, 202246, 202441, 214331, 222277, 225063, 233067, 234085, 239952, 242246, 254893,
        256007, 257612],
}


def spec_of(args) -> FeatureSpec:
    interactions, ngram, skips, seed, permutations, leave = [], [], [], 0, False, False
    args = list(args)
    while args:
        option = args.pop(0)
        if option in ("-q", "--cubic"):
            interactions.append(args.pop(0))
        elif option == "--ngram":
            ngram.append(args.pop(0))
        elif option == "--skips":
            skips.append(args.pop(0))
        elif option == "--hash_seed":
            seed = int(args.pop(0))
        elif option == "--permutations":
            permutations = True
        else:
            assert option == "--leave_duplicate_interactions"
            leave = True
    return FeatureSpec.build(interactions, ngram=ngram, skips=skips, hash_seed=seed, permutations=permutations,
                             leave_duplicates=leave)


@pytest.mark.parametrize("args,expected", list(VW_AUDIT.items()), ids=[" ".join(a) for a in VW_AUDIT])
def test_indices_equal_vw_audit(args, expected):
    data = np.frombuffer(LINE.encode(), np.uint8)
    parsed = parse_chunk(Chunk("line", 1, data), "vw", 18, False, 0, spec_of(args), record=True)
    assert sorted(parsed.index[:parsed.row_ptr[1]].tolist()) == expected
    assert parsed.feature_count[0] == len(expected)


# `total feature number` in VW's reference stderr files (VW test id: file).
VW_REFERENCE_TOTALS = [
    ("vw_0002_25.dat", ["-q", "::", "--leave-duplicate-interactions"], 3309),   # 594: t594.stderr
    ("vw_0002_25.dat", ["-q", "::"], 2985),                                    # 594 without the flag (pip VW)
    ("vw_0002_25.dat", ["--cubic", "abc", "--permutations"], 374),             # 646: t646.stderr
    ("vw_interact.dat", ["-q", "ab", "--permutations"], 234),                  # 720: t720.stderr
    ("vw_interact.dat", ["-q", "ab", "-q", "ba", "--leave-duplicate-interactions"], 399),  # 645: t645.stderr
    ("vw_0002.dat", ["-q", "ab", "--permutations"], 14996),                    # 567: t567.stderr
    ("vw_0001.dat", ["--ngram", "3", "--skips", "1"], 89692),                  # 393: dont_output_best_constant
    ("vw_0001.dat", ["--ngram", "3", "--skips", "1", "--passes", "8", "--holdout-off", "-k"], 717536),  # 1: 0001
]


def _sample_file(sample, tmp_path, name):
    """A sample file by name; "vw_0002_25.dat" is the first 25 lines of vw_0002.dat (VW's 0002_25)."""
    if name != "vw_0002_25.dat":
        return sample / name
    source = tmp_path / name
    source.write_bytes(b"".join(open(sample / "vw_0002.dat", "rb").readlines()[:25]))
    return source


@pytest.mark.parametrize("name,args,expected", VW_REFERENCE_TOTALS)
def test_total_feature_number_equals_vw_reference(cli, sample, tmp_path, name, args, expected):
    source = _sample_file(sample, tmp_path, name)
    code, _, err = cli("train", source, *args, "--report", "r.json", "--cache", str(tmp_path / "c.olcache"))
    assert code == 0, err
    assert json.load(open("r.json"))["total_features"] == expected


def test_model_keeps_the_feature_options(cli, sample):
    args = ["--ngram", "2", "--skips", "1", "--hash-seed", "5", "-q", "::", "--permutations",
            "--leave-duplicate-interactions"]
    assert cli("train", sample / "vw_0002.dat", *args, "-f", "m.olm", "--quiet")[0] == 0
    model = model_file.load("m.olm")
    assert (model.ngram, model.skips, model.hash_seed, model.permutations, model.leave_duplicate_interactions) \
        == (["2"], ["1"], 5, True, True)
    code, _, err = cli("test", sample / "vw_0002.dat", "-i", "m.olm", "--report", "t.json", "--quiet")
    assert code == 0, err
    trained = json.load(open("t.json"))["total_features"]
    code, _, err = cli("train", sample / "vw_0002.dat", *args, "--report", "t2.json", "--quiet")
    assert trained == json.load(open("t2.json"))["total_features"]
    # the learner built from the file predicts what the learner in memory predicts
    lines = open(sample / "vw_0002.dat").read().splitlines()
    learner = Learner(ngram=["2"], skips=["1"], hash_seed=5, interactions=["::"], permutations=True,
                      leave_duplicate_interactions=True)
    learner.learn(lines[:500])
    again = Learner.from_bytes(learner.to_bytes())
    assert np.array_equal(learner.predict(lines[500:]), again.predict(lines[500:]))
    unseeded = Learner.from_model(model_file.decode(learner.to_bytes(), "x"))
    unseeded.model.hash_seed = 0
    assert not np.array_equal(learner.predict(lines[500:]), unseeded.predict(lines[500:]))
    code, _, err = cli("train", sample / "vw_0002.dat", "-i", "m.olm", "--hash-seed", "6")
    assert code == 2 and "hash_seed" in err


@pytest.mark.parametrize("args,message", [
    (["--skips", "1"], "--skips needs --ngram"), (["--ngram", "x"], "--ngram 'x'"), (["--ngram", "8"], "at most 7"),
    (["--ngram", "2", "--skips", "17"], "at most 16"), (["--hash-seed", "-1"], "hash_seed")])
def test_bad_feature_options_are_usage_errors(cli, args, message):
    code, _, err = cli("train", *args, stdin=b"1 |a x y\n")
    assert code == 2 and message in err, err


ALGORITHMS = ["adagrad", "adagrad-dual", "ftrl", "scinol1", "scinol2", "sgd", "gd", "coin"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_predict_only_model_predicts_as_the_full_model(cli, sample, algorithm):
    train, test = sample / "a9a_train.vw", sample / "a9a_test.vw"
    common = ["--" + algorithm, "--loss", "logistic", "-q", "ff", "-b", "16", "--quiet"]
    assert cli("train", train, *common, "-f", "full.olm")[0] == 0
    assert cli("train", train, *common, "-f", "weights.olm", "--predict-only-model")[0] == 0
    full, weights = model_file.load("full.olm"), model_file.load("weights.olm")
    assert weights.algorithm == "sgd" and weights.predict_only == algorithm and weights.state.shape[1] == 1
    assert cli("test", test, "-i", "full.olm", "-p", "full.txt", "--quiet")[0] == 0
    assert cli("test", test, "-i", "weights.olm", "-p", "weights.txt", "--quiet")[0] == 0
    assert open("full.txt").read() == open("weights.txt").read()
    assert np.array_equal(Learner.from_model(full).weights(), Learner.from_model(weights).weights())
    code, _, err = cli("train", train, "-i", "weights.olm")
    assert code == 2 and "--predict-only-model" in err and "cannot learn further" in err
    with pytest.raises(Exception, match="cannot learn further"):
        Learner.from_model(weights).learn(["1 |f a"])


def test_predict_only_multiclass(cli, sample):
    data = sample / "letter_train.vw"
    assert cli("train", data, "--oaa", "26", "-b", "14", "-f", "full.olm", "--quiet")[0] == 0
    assert cli("train", data, "--oaa", "26", "-b", "14", "-f", "w.olm", "--predict-only-model", "--quiet")[0] == 0
    assert cli("test", data, "-i", "full.olm", "-p", "a.txt", "--probabilities", "--quiet")[0] == 0
    assert cli("test", data, "-i", "w.olm", "-p", "b.txt", "--probabilities", "--quiet")[0] == 0
    assert open("a.txt").read() == open("b.txt").read()


def test_crafted_predict_only_headers_are_refused(sample):
    learner = Learner("adagrad")
    learner.learn(open(sample / "vw_0002.dat").read().splitlines()[:50])
    good = model_file.weights_only(learner.model, learner.weights_at(np.arange(learner.model.rows)))
    header = good.header()
    for change, message in ((lambda h: h.update(predict_only={"trained_with": "nope"}), "predict_only"),
                            (lambda h: h.update(predict_only={"trained_with": ["gd"]}), "predict_only"),
                            (lambda h: h["input"].update(ngram=["\u00b2"]), "input.ngram"),
                            (lambda h: h["input"].update(ngram=["9" * 400]), "input.ngram"),
                            (lambda h: h.update(predict_only=[1]), "predict_only"),
                            (lambda h: h["input"].update(ngram=["9"]), "input.ngram"),
                            (lambda h: h["input"].update(skips=["2"]), "input.skips"),
                            (lambda h: h["input"].update(hash_seed=2 ** 32), "input.hash_seed"),
                            (lambda h: h["input"].update(permutations="yes"), "input.permutations")):
        crafted = json.loads(json.dumps(header))
        change(crafted)
        with pytest.raises(model_file.ModelError, match=message.replace(".", r"\.")):
            model_file.validate(crafted, "m.olm")
    full = learner.model.header()
    full["predict_only"] = {"trained_with": "adagrad"}
    with pytest.raises(model_file.ModelError, match="predict-only model holds weights"):
        model_file.validate(json.loads(json.dumps(full)), "m.olm")


# VW's holdout counting: a held-out example counts only in the holdout loss. Numbers from
# VW's reference stderr files: test 53 `-k -c --passes 2 -d train-sets/0001.dat`
# (holdout-loss-not-zero.stderr) and test 713 `-d train-sets/0002_25.dat -k -c --passes 5
# --holdout_period 3` (t713.stderr).
@pytest.mark.parametrize("name,args,expected", [
    ("vw_0001.dat", ["--passes", "2"],
     {"examples": 360, "weighted_example_sum": 360.0, "weighted_label_sum": 160.0, "total_features": 27566,
      "best_constant": 0.444444}),
    ("vw_0002_25.dat", ["--passes", "5", "--holdout-period", "3"],
     {"examples": 85, "weighted_example_sum": 85.0, "weighted_label_sum": 43.71737, "total_features": 1270,
      "best_constant": 0.514322}),
])
def test_holdout_examples_count_as_in_vw(cli, sample, tmp_path, name, args, expected):
    source = _sample_file(sample, tmp_path, name)
    code, _, err = cli("train", source, "--gd", *args, "-k", "--cache", str(tmp_path / "c"), "--report", "r.json")
    assert code == 0, err
    report = json.load(open("r.json"))
    for key, value in expected.items():  # VW prints 6 decimals of float32 sums
        assert report[key] == (value if isinstance(value, int) else pytest.approx(value, abs=1e-5)), key
    assert report["passes"] == int(args[1]) and report["average_loss_is_holdout"]


def test_holdout_examples_count_as_in_vw_multiclass(cli, sample, tmp_path):
    # 3,000 lines, every 10th held out: 2,700 per pass count; 2 passes.
    code, _, err = cli("train", sample / "letter_train.vw", "--oaa", "26", "-b", "12", "--passes", "2", "-k",
                       "--cache", str(tmp_path / "c"), "--report", "r.json", "--quiet")
    assert code == 0, err
    report = json.load(open("r.json"))
    labels = [int(line.split()[0]) for line in open(sample / "letter_train.vw")]
    kept = [y for k, y in enumerate(labels, 1) if k % 10]
    assert report["examples"] == 2 * len(kept) == 5400
    assert report["weighted_label_sum"] == 2 * sum(kept)


# Poisson loss and link. VW's test 131 (`--normalized --loss_function poisson --link poisson
# -b 2 -l 0.1`): its reference predictions pred-sets/ref/poisson.train.normalized.predict and
# average loss 4.062876; test 130 (VW's default learner, `--loss_function poisson --link
# poisson -b 2`): predictions and loss 4.303878 printed by vowpalwabbit 9.11.9 (the reference
# file, from an older VW, has 4.304199); test 579 (`--loss_function poisson` on 0002.dat): 0.010535.
VW_131 = [1, 5.974498, 1.888612, 2.508419, 3.894899, 3.496170, 3.893078, 6.835165, 9.042050, 6.513309, 9.089910,
          11.204132, 4.726909, 16.279272, 10.907686, 5.523266, 8.259170, 5.395276, 5.289113, 9.556392, 4.316383,
          8.234500, 3.660118, 15.666168, 6.660561]
VW_130 = [1, 3.800619, 1.758935, 2.824216, 3.418108, 3.174257, 4.400357, 6.617925, 9.926342, 6.860019, 9.062867,
          10.237043, 4.409323, 16.512039, 13.219710, 5.016036, 8.376304, 4.853390, 4.775280, 10.194972, 3.586254,
          7.299616, 3.085841, 19.471577, 6.456658]


@pytest.mark.parametrize("args,predictions,loss", [
    (["--normalized", "-l", "0.1"], VW_131, 4.062876),
    ([], VW_130, 4.303878),
])
def test_poisson_loss_and_link_match_vw(cli, sample, args, predictions, loss):
    code, _, err = cli("train", sample / "vw_poisson_small.dat", "--gd", *args, "--loss", "poisson", "--link",
                       "poisson", "-b", "2", "-p", "p.txt", "--report", "r.json", "-f", "m.olm")
    assert code == 0, err
    got = [float(line) for line in open("p.txt")]
    np.testing.assert_allclose(got, predictions, rtol=2e-6, atol=1e-6)
    assert json.load(open("r.json"))["average_loss"] == pytest.approx(loss, abs=2e-6)
    # the link is the model's: test writes e^p too, Learner.predict gives e^p
    assert cli("test", sample / "vw_poisson_small.dat", "-i", "m.olm", "-p", "t.txt", "--quiet")[0] == 0
    learner = Learner.from_model(model_file.load("m.olm"))
    lines = open(sample / "vw_poisson_small.dat").read().splitlines()
    np.testing.assert_allclose([float(line) for line in open("t.txt")], learner.predict(lines), rtol=1e-6)
    np.testing.assert_allclose(learner.predict(lines), np.exp(learner.decision_function(lines)), rtol=1e-15)


def test_poisson_on_vw_0002(cli, sample):
    code, _, err = cli("train", sample / "vw_0002.dat", "--gd", "--loss", "poisson", "--report", "r.json")
    assert code == 0, err
    assert json.load(open("r.json"))["average_loss"] == pytest.approx(0.010535, abs=1e-6)


def test_poisson_needs_counts(cli):
    code, _, err = cli("train", "--loss", "poisson", "--strict", stdin=b"2 |a x\n-1 |a y\n")
    assert code == 1 and "label must be >= 0 for --loss poisson" in err and "line 2" in err, err


# --initial_weight: VW's test 490 (`--initial_weight 0.5 -d train-sets/0002_25.dat -p
# initial_weight_05.predict`: the predictions vowpalwabbit 9.11.9 writes, in sample_data (VW's own
# reference file, from an older VW, differs by up to 8e-6 on 3 lines), average loss
# 0.030611) and test 586 (the whole 0002.dat: 0.006400).
def test_initial_weight_matches_vw(cli, sample, tmp_path):
    source = tmp_path / "0002_25.dat"
    source.write_bytes(b"".join(open(sample / "vw_0002.dat", "rb").readlines()[:25]))
    code, _, err = cli("train", source, "--gd", "--initial-weight", "0.5", "-p", "p.txt", "--report", "r.json")
    assert code == 0, err
    got = [line.split() for line in open("p.txt")]
    want = [line.split() for line in open(sample / "vw_initial_weight_05.predict")]
    assert [tag for _, tag in got] == [tag for _, tag in want]
    np.testing.assert_allclose([float(p) for p, _ in got], [float(p) for p, _ in want], atol=1e-6)
    assert json.load(open("r.json"))["average_loss"] == pytest.approx(0.030611, abs=1e-6)
    code, _, err = cli("train", sample / "vw_0002.dat", "--gd", "--initial-weight", "0.5", "--report", "r.json")
    assert json.load(open("r.json"))["average_loss"] == pytest.approx(0.006400, abs=1e-6)


def test_initial_weight_model_and_refusals(cli, sample):
    learner = Learner("adagrad", initial_weight=-0.25, min_prediction=-10.0, max_prediction=10.0)
    assert np.all(learner.weights() == -0.25)
    again = Learner.from_bytes(learner.to_bytes())   # a table that never learned, holding the start
    assert again.model.initial_weight == -0.25 and np.all(again.weights() == -0.25)
    assert again.predict(["| a b"])[0] == pytest.approx(-0.75)   # a, b and the constant
    code, _, err = cli("train", "--ftrl", "--initial-weight", "1", stdin=b"1 |a x\n")
    assert code == 2 and "--ftrl does not keep its weights" in err
    crafted = model_file.encode(learner.model.replace(initial_weight=0.0))  # weights, yet nothing learned
    with pytest.raises(model_file.ModelError, match="state is not empty"):
        model_file.decode(crafted, "m.olm")


# --oaa labels as VW's oaa.cc reads them (tests 357-360: train-sets/probabilities_*_ind.dat,
# `--probabilities --oaa=4 --loss_function=logistic`, 358 with --indexing 0): 1..K until a
# label 0 (then 0..K-1) or K (then 1..K) is learned from; a label outside matches no class.
OAA_DATA = {
    "one": "1 | 1:2 2:3\n2 | 5:2 2:3\n4 | 1:2 2:3\n4 | 2:2 3:3\n2 | 2:2 4:3\n3 | 5:2 4:3\n",
    "zero": "0 | 1:2 2:3\n1 | 5:2 2:3\n3 | 1:2 2:3\n3 | 2:2 3:3\n1 | 2:2 4:3\n2 | 5:2 4:3\n",
    "mixed": "1 | 1:2 2:3\n2 | 5:2 2:3\n0 | 1:2 2:3\n0 | 2:2 3:3\n4 | 2:2 4:3\n3 | 5:2 4:3\n",
}
# pred-sets/ref/oaa_*_probabilities.predict (the class labels each line names) and the
# reference stderr files' average loss and average multiclass log loss
OAA_VW = {
    "one": ([1, 1, 1, 1, 1, 1], 0.833333, 1.534626),
    "zero": ([0, 0, 0, 0, 0, 0], 0.833333, 1.534626),
    "mixed": ([1, 1, 0, 0, 0, 0], 0.500000, 1.262642),
}
OAA_VW_ROW2 = [0.347964, 0.217345, 0.217345, 0.217345]   # every file's second line


@pytest.mark.parametrize("name,extra", [("one", []), ("zero", []), ("zero", ["--indexing", "0"]), ("mixed", [])])
def test_oaa_labels_from_zero_as_vw(cli, tmp_path, name, extra):
    data = tmp_path / f"{name}.dat"
    data.write_text(OAA_DATA[name])
    code, _, err = cli("train", data, "--gd", "--oaa", "4", "--loss", "logistic", "--probabilities", *extra,
                       "-p", "p.txt", "--report", "r.json", "-f", "m.olm")
    assert code == 0, err
    first_labels, average_loss, log_loss = OAA_VW[name]
    lines = [line.split() for line in open("p.txt")]
    assert [int(line[0].split(":")[0]) for line in lines] == first_labels
    assert [[int(t.split(":")[0]) - first for t in line] for line, first in zip(lines, first_labels)] \
        == [[0, 1, 2, 3]] * 6
    np.testing.assert_allclose([float(t.split(":")[1]) for t in lines[1]], OAA_VW_ROW2, atol=5e-5)
    report = json.load(open("r.json"))
    assert report["examples"] == 6 and report["bad_lines"] == 0
    assert report["average_loss"] == pytest.approx(average_loss, abs=1e-6)
    # the probabilities after the fourth example differ from VW's by up to 1e-3 (--gd's
    # multiclass learning, also on 1..K labels); the log loss is the mean over all six
    assert report["multiclass_log_loss"] == pytest.approx(log_loss, abs=1e-3)
    assert model_file.load("m.olm").indexing == (1 if name == "one" else 0)


def test_oaa_indexing_in_test_and_refusals(cli, tmp_path):
    (tmp_path / "train.dat").write_text("1 |a x\n2 |a y\n1 |a x\n")
    assert cli("train", "train.dat", "--oaa", "3", "-f", "m.olm", "--quiet")[0] == 0
    assert model_file.load("m.olm").indexing == 2          # neither 0 nor 3 seen: 1..K, undecided
    (tmp_path / "test.dat").write_text("0 |a x\n1 |a x\n")
    code, _, err = cli("test", "test.dat", "-i", "m.olm", "-p", "p.txt", "--report", "r.json")
    assert code == 0, err
    report = json.load(open("r.json"))
    assert report["examples"] == 2 and report["average_loss"] == 0.5   # the 0 matches no class
    assert [line.split()[0] for line in open("p.txt")] == ["1", "1"]
    code, _, err = cli("train", "--indexing", "0", stdin=b"1 |a x\n")
    assert code == 2 and "--indexing is for --oaa" in err
    code, _, err = cli("train", "--oaa", "3", "--indexing", "2", stdin=b"1 |a x\n")
    assert code == 2 and "indexing" in err
    code, _, err = cli("train", "--oaa", "3", "--strict", stdin=b"4 |a x\n")
    assert code == 1 and "label 4 is not a class of --oaa/--softmax 3 (classes 1..3, or 0..2" in err


def test_serve_writes_vw_0_indexed_probabilities(cli, tmp_path, server):
    (tmp_path / "zero.dat").write_text(OAA_DATA["zero"])
    assert cli("train", "zero.dat", "--oaa", "4", "--loss", "logistic", "-f", "m.olm", "--quiet")[0] == 0
    assert cli("test", "zero.dat", "-i", "m.olm", "--probabilities", "-p", "p.txt", "--quiet")[0] == 0
    expected = open("p.txt", "rb").read().splitlines()
    assert all(line.startswith(b"0:") for line in expected)
    srv = server(tmp_path / "m.olm", "--probabilities")
    with srv.connect() as s:
        assert ask(s, OAA_DATA["zero"].splitlines()) == expected
