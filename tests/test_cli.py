import bz2
import gzip
import json
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

import olcli
from olcli import model as model_file

TRAIN_LINES = 6000
TEST_LINES = 2000


def lines_of(path):
    return path.read_bytes().splitlines(keepends=True)


def test_version_and_help(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.decode().startswith("olcli ")
    code, out, _ = cli("train", "--help")
    assert code == 0 and b"--final-model" in out


def test_train_file_then_test_prints_one_prediction_per_line(cli, sample, tmp_path):
    code, out, err = cli("train", sample / "a9a_train.vw", "--loss", "logistic", "-f", "m.olm")
    assert code == 0, err
    assert out == b""  # stdout carries data only
    assert "average loss" in err and "finished run" in err
    code, out, err = cli("test", sample / "a9a_test.vw", "-i", "m.olm", "-p", "-")
    assert code == 0, err
    rows = out.decode().splitlines()
    assert len(rows) == TEST_LINES
    assert all(math.isfinite(float(r)) for r in rows)


def test_stdin_dash_and_no_data_are_the_same(cli, sample):
    data = (sample / "a9a_train.vw").read_bytes()
    assert cli("train", "-", "--loss", "logistic", "-f", "a.olm", "--quiet", stdin=data)[0] == 0
    assert cli("train", "--loss", "logistic", "-f", "b.olm", "--quiet", stdin=data)[0] == 0
    assert cli("train", sample / "a9a_train.vw", "--loss", "logistic", "-f", "c.olm", "--quiet")[0] == 0
    a, b, c = (model_file.load(name).state for name in ("a.olm", "b.olm", "c.olm"))
    assert np.array_equal(a, b) and np.array_equal(a, c)


def test_compressed_inputs(cli, sample, tmp_path):
    raw = (sample / "a9a_train.vw").read_bytes()
    (tmp_path / "d.vw.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "d.vw.bz2").write_bytes(bz2.compress(raw))
    cli("train", sample / "a9a_train.vw", "-f", "plain.olm", "--quiet")
    for name in ("d.vw.gz", "d.vw.bz2"):
        code, _, err = cli("train", name, "-f", "z.olm", "--quiet")
        assert code == 0, err
        assert np.array_equal(model_file.load("z.olm").state, model_file.load("plain.olm").state)


def test_damaged_gzip_is_a_data_error(cli, tmp_path):
    (tmp_path / "bad.vw.gz").write_bytes(gzip.compress(b"1 |f a\n" * 1000)[:50])
    code, _, err = cli("train", "bad.vw.gz", "--quiet")
    assert code == 1 and "bad.vw.gz" in err


def test_archive_damaged_late_keeps_the_lines_before_the_damage(cli, sample, tmp_path):
    """The reader thread reads ahead; its error surfaces after the lines it had read,
    which are learned (less at most one read piece) and saved."""
    from olcli.inputs import READ_PIECE

    data = (sample / "a9a_train.vw").read_bytes() * 20
    blob = gzip.compress(data)
    damaged = blob[: int(len(blob) * 0.8)]
    (tmp_path / "late.vw.gz").write_bytes(damaged)
    readable = len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(damaged))
    assert readable < len(data)
    most = data[:readable].count(b"\n")
    least = data[:readable - READ_PIECE].count(b"\n")
    code, _, err = cli("train", "late.vw.gz", "--loss", "logistic", "-f", "m.olm", "--quiet")
    assert code == 1 and "late.vw.gz" in err
    learned = int(olcli.load("m.olm").counters["examples"])
    assert least <= learned <= most
    assert f"({learned} examples) was written to m.olm" in err


def test_libsvm_input_learns(cli, sample):
    code, _, err = cli("train", sample / "a9a_train.libsvm", "--loss", "logistic", "--report", "r.json", "--quiet")
    assert code == 0, err
    report = json.load(open("r.json"))
    assert report["format"] == "libsvm"
    assert report["average_loss"] < 0.9 * report["best_constant_loss"]


def test_predictions_carry_tags_and_link(cli, tmp_path):
    data = b"1 'first |f a b\n-1 second|f c\n|f a\n"
    code, out, err = cli("train", "--loss", "logistic", "-p", "-", "--link", "logistic", stdin=data)
    assert code == 0, err
    rows = out.decode().splitlines()
    assert rows[0] == "0.500000 first"
    assert rows[1].endswith(" second") and rows[2].count(" ") == 0
    assert all(0.0 < float(r.split()[0]) < 1.0 for r in rows)


def test_continuing_equals_one_long_run_bit_for_bit(cli, sample, tmp_path):
    data = lines_of(sample / "a9a_train.vw")
    (tmp_path / "A.vw").write_bytes(b"".join(data[:3500]))
    (tmp_path / "B.vw").write_bytes(b"".join(data[3500:]))
    args = ["--loss", "logistic", "--quiet"]
    assert cli("train", "A.vw", "-f", "a.olm", *args)[0] == 0
    code, predictions_b, err = cli("train", "B.vw", "-i", "a.olm", "-f", "ab.olm", "-p", "-", *args)
    assert code == 0, err
    code, predictions_all, _ = cli("train", "A.vw", "B.vw", "-f", "all.olm", "-p", "-", *args)
    assert code == 0
    assert predictions_all.splitlines()[3500:] == predictions_b.splitlines()
    assert (tmp_path / "ab.olm").read_bytes() == (tmp_path / "all.olm").read_bytes()


def test_options_that_contradict_the_initial_model_are_refused(cli, sample):
    cli("train", sample / "a9a_train.vw", "--loss", "logistic", "-f", "m.olm", "--quiet")
    code, _, err = cli("train", sample / "a9a_train.vw", "-i", "m.olm", "--loss", "squared")
    assert code == 2 and "loss" in err and "m.olm" in err
    code, _, err = cli("train", sample / "a9a_train.vw", "-i", "m.olm", "-b", "10")
    assert code == 2 and "bits" in err


def test_test_never_changes_the_model(cli, sample, tmp_path):
    cli("train", sample / "a9a_train.vw", "--loss", "logistic", "-f", "m.olm", "--quiet")
    before = (tmp_path / "m.olm").read_bytes()
    _, first, _ = cli("test", sample / "a9a_test.vw", "-i", "m.olm", "-p", "-", "--quiet")
    _, second, _ = cli("test", sample / "a9a_test.vw", "-i", "m.olm", "-p", "-", "--quiet")
    assert first == second
    assert (tmp_path / "m.olm").read_bytes() == before


def test_report_json_matches_an_independent_count(cli, sample):
    code, _, err = cli("train", sample / "a9a_train.vw", "--loss", "logistic", "--report", "r.json")
    assert code == 0
    report = json.load(open("r.json"))
    labels = [float(line.split()[0]) for line in lines_of(sample / "a9a_train.vw")]
    positives, negatives = labels.count(1.0), labels.count(-1.0)
    p = positives / len(labels)
    assert report["complete"] is True and report["command"] == "train"
    assert report["examples"] == TRAIN_LINES
    assert report["weighted_label_sum"] == positives - negatives
    assert report["best_constant"] == pytest.approx(math.log(positives / negatives), rel=1e-12)
    assert report["best_constant_loss"] == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)), rel=1e-12)
    features = sum(len(line.split()) - 1 for line in lines_of(sample / "a9a_train.vw"))  # -1 label -1 "|f" +1 constant
    assert report["total_features"] == features
    assert report["average_loss"] < report["best_constant_loss"]
    assert 0.5 < report["auc"] <= 1.0 and 0.5 < report["accuracy"] <= 1.0
    assert f"average loss = {report['average_loss']:.6f}" in err
    counters = [r["example_counter"] for r in report["progress"]]
    assert counters == [2 ** k for k in range(len(counters))] and counters[-1] == 4096


def test_bad_lines_are_skipped_counted_and_named(cli, tmp_path):
    (tmp_path / "d.vw").write_text("1 |f a\n1 |f a:zz\n-1 |f b\nnan |f a\n1 |f a\n")
    code, _, err = cli("train", "d.vw", "--report", "r.json")
    assert code == 0
    assert "d.vw line 2" in err and "a:zz" in err and "d.vw line 4" in err
    report = json.load(open("r.json"))
    assert report["bad_lines"] == 2 and report["examples"] == 3
    code, _, err = cli("train", "d.vw", "--strict", "-f", "m.olm")
    assert code == 1 and "d.vw line 2" in err and "--strict" in err
    assert "(1 examples)" in err and olcli.load("m.olm").counters["examples"] == 1


@pytest.mark.parametrize("args,code,message", [
    (["train", "missing.vw"], 1, "does not exist"),
    (["train", "-b", "40"], 2, "between 1 and 30"),
    (["train", "--no-such-option"], 2, "No such option"),
    (["train", "-f", "no/such/dir/m.olm"], 2, "does not exist"),
    (["test", "-"], 2, "Missing option"),
    (["test", "-", "-i", "missing.olm"], 1, "cannot read model"),
    (["train", "--loss", "cubic"], 2, "--loss takes one of squared, logistic"),
])
def test_refusals_and_exit_codes(cli, args, code, message):
    got, out, err = cli(*args, stdin=b"1 |f a\n")
    assert got == code, err
    assert message in err and out == b""
    assert "Traceback" not in err


def test_corrupt_model_is_refused_without_traceback(cli, sample, tmp_path):
    cli("train", sample / "a9a_train.vw", "-f", "m.olm", "--quiet")
    raw = bytearray((tmp_path / "m.olm").read_bytes())
    raw[len(raw) // 2] ^= 0x10
    (tmp_path / "bad.olm").write_bytes(bytes(raw))
    code, _, err = cli("test", sample / "a9a_test.vw", "-i", "bad.olm")
    assert code == 1 and "checksum" in err and "Traceback" not in err
    for args in (["--traceback", "test", sample / "a9a_test.vw", "-i", "bad.olm"],
                 ["test", sample / "a9a_test.vw", "-i", "bad.olm", "--traceback"]):
        code, _, err = cli(*args)
        assert code == 1 and "Traceback" in err and "checksum" in err


def test_inspect_lists_header_and_weights(cli, sample):
    cli("train", sample / "a9a_train.vw", "--adagrad", "--loss", "logistic", "-f", "m.olm", "--quiet")
    code, out, _ = cli("inspect", "m.olm", "--top", "3")
    text = out.decode()
    assert code == 0
    assert "algorithm: adagrad" in text and "loss: logistic" in text and "eta=0.3" in text
    nonzero = int(np.count_nonzero(model_file.load("m.olm").state[:, 0]))
    assert f"non-zero weights: {nonzero}" in text
    listed = text.split("largest weights (index: weight):\n")[1].splitlines()
    assert len(listed) == 3 and all(line.startswith("  ") for line in listed)


# --- real processes ---

def olcli_command():
    return [sys.executable, "-m", "olcli"]


def test_real_subprocess_pipe(sample, tmp_path):
    shell = (f"cat {sample / 'a9a_train.vw'} | {' '.join(olcli_command())} train - --loss logistic -f m.olm "
             f"&& {' '.join(olcli_command())} test {sample / 'a9a_test.vw'} -i m.olm -p - | wc -l")
    done = subprocess.run(shell, shell=True, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(TEST_LINES)
    assert "finished run" in done.stderr
    assert olcli.load(tmp_path / "m.olm").counters["examples"] == TRAIN_LINES


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_do_not_import_numba(flag):
    done = subprocess.run([*olcli_command(), flag], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "olcli.cli" in imported
    assert not [name for name in imported if name.split(".")[0] in ("numba", "llvmlite")]


@pytest.mark.parametrize("signum,code", [(2, 130), (15, 143)])
def test_signal_while_waiting_for_input_keeps_what_was_learned(sample, tmp_path, signum, code):
    from olcli.inputs import chunk_sizes

    data = (sample / "a9a_train.vw").read_bytes() * 6
    read = 0   # the bytes of the chunks filled: they are learned, then olcli waits for more
    for size in chunk_sizes():
        if read + size > len(data):
            break
        read += size
    learned = data[:data.rfind(b"\n", 0, read) + 1].count(b"\n")
    assert learned > 16384 and read < len(data)
    process = subprocess.Popen([*olcli_command(), "train", "-", "--loss", "logistic", "-f", "m.olm",
                                "--report", "r.json"], cwd=tmp_path, stdin=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdin.write(data)
    process.stdin.flush()
    for line in process.stderr:  # the progress rows of the chunks filled
        if b" 16384 " in line:
            break
    process.send_signal(signum)
    err = process.communicate(timeout=60)[1].decode()
    assert process.returncode == code, err
    assert f"({learned} examples) was written to m.olm" in err
    assert olcli.load(tmp_path / "m.olm").counters["examples"] == learned
    report = json.load(open(tmp_path / "r.json"))
    assert report["complete"] is False and "interrupted" in report["stopped_by"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.olm", "r.json"]


def test_closed_predictions_pipe_keeps_the_model(sample, tmp_path):
    (tmp_path / "big.vw").write_bytes((sample / "a9a_train.vw").read_bytes() * 10)
    shell = f"{' '.join(olcli_command())} train big.vw -f m.olm -p - --quiet | head -1; echo ${{PIPESTATUS[0]}} >&2"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout.count("\n") == 1
    assert done.stderr.strip().splitlines() == ["141"]  # quietly: no message, exit 141 (128 + SIGPIPE)
    assert olcli.load(tmp_path / "m.olm").counters["examples"] > 0


def test_data_in_another_format_than_the_model_is_refused(cli, sample):
    cli("train", sample / "a9a_train.vw", "-f", "m.olm", "--quiet")
    code, _, err = cli("test", sample / "a9a_test.libsvm", "-i", "m.olm")
    assert code == 1 and "looks like libsvm" in err and "--format vw" in err
    code, _, err = cli("train", sample / "a9a_test.libsvm", "-i", "m.olm", "--format", "libsvm")
    assert code == 2 and "trained on vw input" in err
