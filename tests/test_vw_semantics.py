"""VW's behaviour behind its option names (issue 15): n-grams and skips, --hash_seed,
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


@pytest.mark.parametrize("name,args,expected", VW_REFERENCE_TOTALS)
def test_total_feature_number_equals_vw_reference(cli, sample, tmp_path, name, args, expected):
    if name == "vw_0002_25.dat":
        source = tmp_path / name
        source.write_bytes(b"".join(open(sample / "vw_0002.dat", "rb").readlines()[:25]))
    else:
        source = sample / name
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
