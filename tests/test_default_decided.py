"""The default decided: VW's hashing by default, VW's options under the default
(they select the learner that takes them), and mistakes a scheduled job must notice.

The oracles are VW's: the indices `vw --audit` prints (tests/test_hashing.py's EDGE and
VW_AUDIT), the predictions vowpalwabbit 9.11.9 writes for --initial_weight 0.5
(sample_data/vw_initial_weight_05.predict), MurmurHash3 by tests/naive.py."""

import json
import os

import numpy as np
import pytest

from olcli import model as model_file
from tests import naive
from tests.test_hashing import EDGE, VW_AUDIT
from tests.test_vw_compat import _as_format_3, _audit_rows


# --- 1. hashing: VW's --hash strings by default; a model keeps its own rule ---------------

def test_a_new_default_model_hashes_digit_names_as_vw(cli, tmp_path):
    (tmp_path / "edge.vw").write_bytes(EDGE)
    code, out, err = cli("train", "edge.vw", "--audit", "-b", "24", "--noconstant", "--quiet", "-f", "m.olm")
    assert code == 0, err
    assert _audit_rows(out) == VW_AUDIT[0]       # the indices vw --audit prints (names 5, 58, 0123, ...)
    model = model_file.load("m.olm")
    assert model.algorithm == "mix" and model.hash == "strings"
    header, _ = model_file.read_header(open("m.olm", "rb").read(), "m.olm")
    assert header["input"]["hash_rule"] == "strings"
    # a digit name is its number plus the namespace's hash, not MurmurHash3 of the name
    assert VW_AUDIT[0][1][0] != naive.vw_feature_index("123", "7", 24)


@pytest.mark.parametrize("old_format", [False, True])
def test_a_model_written_before_keeps_its_hashing_on_continue(cli, tmp_path, old_format):
    """A model made under the old default (--hash all), and the same file as format 3
    (written before the rule was recorded), continue with MurmurHash3 of every name."""
    (tmp_path / "edge.vw").write_bytes(EDGE * 2)
    code, _, err = cli("train", "edge.vw", "--hash", "all", "-b", "24", "--noconstant", "--quiet", "-f", "a.olm")
    assert code == 0, err
    if old_format:
        _as_format_3("a.olm", "old.olm")
        os.replace("old.olm", "a.olm")
        assert model_file.read_header(open("a.olm", "rb").read(), "a.olm")[0]["format_version"] == 3
    code, out, err = cli("train", "edge.vw", "-i", "a.olm", "-f", "b.olm", "--audit", "--quiet")
    assert code == 0, err
    rows = _audit_rows(out)
    # MurmurHash3 of the digit names, not VW's strings rule
    assert rows[1] == [naive.vw_feature_index("123", "7", 24), naive.vw_feature_index("123", "x", 24)]
    assert rows[2] == [naive.vw_feature_index("", "7", 24), naive.vw_feature_index("", "x", 24)]
    assert rows[1] != VW_AUDIT[0][1] and rows[2] != VW_AUDIT[0][2]
    assert model_file.load("b.olm").hash == "all"
    # and giving the new default's rule to the old model is refused, naming it
    code, _, err = cli("train", "edge.vw", "-i", "a.olm", "--hash", "strings", "-f", "c.olm", "--quiet")
    assert code == 2 and "hash" in err and not os.path.exists("c.olm"), err


def test_hash_all_stays_an_option(cli, tmp_path):
    (tmp_path / "edge.vw").write_bytes(EDGE)
    code, out, err = cli("train", "edge.vw", "--hash", "all", "--audit", "-b", "18", "--noconstant", "--quiet",
                         "-f", "m.olm")
    assert code == 0, err
    assert _audit_rows(out)[1] == [naive.vw_feature_index("123", "7", 18), naive.vw_feature_index("123", "x", 18)]
    assert model_file.load("m.olm").hash == "all"


# --- 2. VW's options under the default select the learner that takes them -----------------

def _lines(err: str, start: str) -> list:
    return [line for line in err.splitlines() if line.startswith(start)]


def test_vw_initial_weight_with_no_flag_learns_with_gd_as_vw(cli, sample, tmp_path):
    """VW's test 490 with VW's spelling and no algorithm flag: VW's predictions."""
    source = tmp_path / "0002_25.dat"
    source.write_bytes(b"".join(open(sample / "vw_0002.dat", "rb").readlines()[:25]))
    code, _, err = cli("train", "-d", source, "--initial_weight", "0.5", "-p", "p.txt", "--report", "r.json",
                       "-f", "m.olm")
    assert code == 0, err
    notes = _lines(err, "note: ")
    assert notes == ["note: --initial-weight: not an option of the default learner (--mix); learning with --gd "
                     "(VW's default learner), which takes it (an algorithm flag chooses another)"]
    got = [line.split() for line in open("p.txt")]
    want = [line.split() for line in open(sample / "vw_initial_weight_05.predict")]
    np.testing.assert_allclose([float(p) for p, _ in got], [float(p) for p, _ in want], atol=1e-6)
    report = json.load(open("r.json"))
    assert report["algorithm"] == "gd" and report["algorithm_note"] == notes[0][len("note: "):]
    assert report["average_loss"] == pytest.approx(0.030611, abs=1e-6)
    model = model_file.load("m.olm")
    assert model.algorithm == "gd" and model.initial_weight == 0.5


@pytest.mark.parametrize("args,algorithm,param", [
    (["--l1", "1e-6"], "gd", ("l1", 1e-6)),
    (["--l2", "1e-5"], "gd", ("l2", 1e-5)),
    (["--l1", "1e-6", "--l2", "1e-5", "-l", "0.3"], "gd", ("eta", 0.3)),
    (["--constant", "0.5"], "gd", None),
    (["-C", "0.5", "--power_t", "0.4"], "gd", ("power_t", 0.4)),
    (["--adaptive"], "gd", ("normalized", 0.0)),
    (["--radius", "2"], "adagrad", ("radius", 2.0)),
    (["--l1", "1e-6", "--radius", "2"], "adagrad", ("l1", 1e-6)),
    (["--ftrl-beta", "0.5"], "ftrl", ("beta", 0.5)),
])
def test_an_option_the_default_cannot_honour_selects_its_learner(cli, sample, args, algorithm, param):
    data = sample / "a9a_train.vw"
    code, chosen, err = cli("train", data, "--loss", "logistic", "-p", "-", "-f", "m.olm", "--report", "r.json",
                            "--quiet", *args)
    assert code == 0, err
    notes = _lines(err, "note: ")
    assert len(notes) == 1 and f"learning with --{algorithm}" in notes[0] and "default learner (--mix)" in notes[0]
    assert len(err.strip().splitlines()) == 1, err   # one line, and nothing else under --quiet
    model = model_file.load("m.olm")
    assert model.algorithm == algorithm
    if param:
        assert model.params[param[0]] == pytest.approx(param[1])
    report = json.load(open("r.json"))
    assert report["algorithm"] == algorithm and report["algorithm_note"] == notes[0][len("note: "):]
    # the same run as with the algorithm flag given
    code, flagged, err = cli("train", data, "--loss", "logistic", "-p", "-", "--quiet", f"--{algorithm}", *args)
    assert code == 0 and not _lines(err, "note: "), err
    assert chosen == flagged


def test_the_default_still_runs_when_it_takes_the_options(cli, sample):
    code, _, err = cli("train", sample / "a9a_train.vw", "-l", "0.3", "--power_t", "0.4", "-f", "m.olm",
                       "--report", "r.json", "--quiet")
    assert code == 0 and err == "", err
    assert model_file.load("m.olm").algorithm == "mix" and json.load(open("r.json"))["algorithm_note"] is None
    code, _, err = cli("train", sample / "a9a_train.vw", "--constant", "0", "--quiet", "-f", "z.olm")
    assert code == 0 and err == "" and model_file.load("z.olm").algorithm == "mix", err


def test_options_are_refused_when_a_flag_or_model_decides(cli, sample):
    data = sample / "a9a_train.vw"
    code, _, err = cli("train", data, "--mix", "--l1", "1e-6", "--quiet")
    assert code == 2 and "--l1 does not apply to --mix" in err, err
    assert cli("train", data, "-f", "mix.olm", "--quiet")[0] == 0
    code, _, err = cli("train", data, "-i", "mix.olm", "--l1", "1e-6", "-f", "again.olm", "--quiet")
    assert code == 2 and "--l1 does not apply to --mix" in err and not os.path.exists("again.olm"), err
    # a model of the learner the option selected continues with it, without a note
    assert cli("train", data, "--l1", "1e-6", "-f", "gd.olm", "--quiet")[0] == 0
    code, _, err = cli("train", data, "-i", "gd.olm", "--l1", "1e-6", "-f", "gd2.olm", "--quiet")
    assert code == 0 and err == "" and model_file.load("gd2.olm").algorithm == "gd", err


def test_olcli_vw_says_nothing_of_the_default(cli, sample):
    code, _, err = cli("vw", "-d", sample / "a9a_train.vw", "--l1", "1e-6", "--adaptive", "-f", "m.olm")
    assert code == 0 and not _lines(err, "note: "), err
    assert model_file.load("m.olm").algorithm == "gd"


# --- 6. mistakes cron must notice -----------------------------------------------------------

def test_oaa_on_minus_one_plus_one_labels_exits_1_and_says_the_fix(cli, sample):
    code, _, err = cli("train", sample / "a9a_train.vw", "--oaa", "2", "-f", "m.olm", "--report", "r.json")
    assert code == 1, err
    error = err.strip().splitlines()[-1]
    assert error.startswith("Error: most lines were bad and skipped (4545 of 6000)"), error
    assert "label -1 is not a class of --oaa/--softmax 2 (classes 1..2, or 0..1" in error
    assert "drop --oaa/--softmax" in error and "0..K" not in err
    assert error.endswith("the model (1455 examples) was written to m.olm")
    assert model_file.load("m.olm").counters[0] == 1455
    report = json.load(open("r.json"))
    assert report["complete"] is True and report["error"] == error[len("Error: "):]
    assert report["model_out"] == "m.olm" and report["bad_lines"] == 4545
    assert "75.8%" in report["warnings"][0]


def test_too_few_classes_exits_1_naming_k_and_the_label(cli, sample):
    # letter: 26 classes; --oaa 10 skips the letters 11..26 (59% of the lines)
    code, _, err = cli("train", sample / "letter_train.vw", "--oaa", "10", "-f", "m.olm", "--report", "r.json",
                       "--quiet")
    assert code == 1
    first = err.splitlines()[0]
    assert "label 20 is not a class of --oaa/--softmax 10 (classes 1..10, or 0..9" in first, first
    assert "20 classes or more: give --oaa/--softmax the number of classes" in first
    assert os.path.exists("m.olm") and json.load(open("r.json"))["error"].startswith("most lines were bad")
    labels = [int(line.split()[0]) for line in open(sample / "letter_train.vw")]
    skipped = sum(label > 10 for label in labels)
    assert f"({skipped} of {len(labels)})" in err and skipped > len(labels) / 2


def test_half_the_lines_bad_is_not_most(cli, tmp_path):
    (tmp_path / "h.vw").write_text("1 |f a\n" * 5 + "x |f a\n" * 5)
    code, _, err = cli("train", "h.vw", "--quiet", "-f", "m.olm")
    assert code == 0 and "Error" not in err, err
    (tmp_path / "h.vw").write_text("1 |f a\n" * 5 + "x |f a\n" * 6)
    assert cli("train", "h.vw", "--quiet", "-f", "m.olm")[0] == 1
    # test (olcli test) too: the model is not changed, the run exits 1
    code, _, err = cli("test", "h.vw", "-i", "m.olm", "--quiet")
    assert code == 1 and "most lines were bad and skipped (6 of 11)" in err, err


def test_the_summary_says_na_one_way_and_no_loss_without_a_best_constant(cli, tmp_path):
    (tmp_path / "one.vw").write_text("1 |f a\n1 |f b\n1 |f a\n")
    code, _, err = cli("train", "one.vw", "--loss", "logistic", "--report", "r.json")
    assert code == 0, err
    summary = err[err.index("finished run"):]
    assert "best constant = n.a.\n" in summary and "best constant's loss" not in summary
    assert "n/a" not in err
    report = json.load(open("r.json"))
    assert report["best_constant"] is None and report["best_constant_loss"] is None
    (tmp_path / "two.vw").write_text("1 |f a\n-1 |f b\n1 |f a\n")
    code, _, err = cli("train", "two.vw", "--loss", "logistic")
    p = 2 / 3
    assert f"best constant's loss = {-(p * np.log(p) + (1 - p) * np.log(1 - p)):.6f}" in err


def test_vw_hashing_keeps_the_interaction_bound_of_combinations(cli, tmp_path):
    """-q ww generates C(k + 1, 2) features for k in w: the bound per example counts those,
    not k^2 (the rule's flag shares a word with --permutations' in the feature spec)."""
    (tmp_path / "w.vw").write_text("1 |w " + " ".join(f"f{i}" for i in range(3000)) + "\n")  # 4.5M < 8.4M < 9M
    code, _, err = cli("train", "w.vw", "-q", "ww", "--report", "r.json", "--quiet")
    assert code == 0 and "interactions would generate" not in err, err
    assert json.load(open("r.json"))["total_features"] == 3000 + 3000 * 3001 // 2 + 1


def test_vw_cache_flag_under_train_is_the_flag_when_no_path_follows(cli, sample, tmp_path):
    """VW's lines end in --cache or put an option after it (VW's test 105: `--cache
    --holdout_off`): under olcli train that is VW's cache flag, not olcli's --cache PATH."""
    lines = open(sample / "vw_0001.dat", "rb").readlines()[:50]
    (tmp_path / "d.vw").write_bytes(b"".join(lines))
    code, _, err = cli("train", "-k", "-d", "d.vw", "--passes", "2", "--cache", "--holdout_off", "--report",
                       "r.json", "--quiet")
    assert code == 0, err
    report = json.load(open("r.json"))
    assert report["examples"] == 100 and report["holdout_period"] == 0 and not os.path.exists("--holdout_off")
    assert report["cache"] == "d.vw.olcache"
    code, _, err = cli("train", "-k", "-d", "d.vw", "--passes", "2", "--cache", "--report", "r.json", "--quiet")
    assert code == 0 and json.load(open("r.json"))["cache"] == "d.vw.olcache", err
    code, _, err = cli("train", "d.vw", "--passes", "2", "--cache", "mine.cache", "--report", "r.json", "--quiet")
    assert code == 0 and json.load(open("r.json"))["cache"] == "mine.cache", err
