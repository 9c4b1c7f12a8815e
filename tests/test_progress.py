"""--progress (a bar on a terminal instead of the table) and --strict/--skip-bad-lines."""

import bz2
import gzip
import io
import json
import os
import pty
import subprocess
import sys

import pytest

import olcli

from olcli import sinks
from olcli.inputs import input_size
from olcli.learner import Learner
from olcli.run import RunOptions, run

TRAIN_LINES = 6000


def run_with_terminal_stderr(args, stdin=None, cwd=None):
    """Run olcli with stderr on a pseudo-terminal: (exit code, stdout bytes, what the terminal showed)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    process = subprocess.Popen([sys.executable, "-m", "olcli", *args], stdin=stdin or subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    shown = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # the other end closed
            break
        if not data:
            break
        shown.append(data)
    out = process.stdout.read()
    process.wait()
    os.close(master)
    return process.returncode, out, b"".join(shown).decode("utf-8", errors="replace")


def test_progress_bar_on_a_terminal_replaces_the_table(sample, tmp_path):
    data = str(sample / "a9a_train.vw")
    code, _, shown = run_with_terminal_stderr(["train", data, "--loss", "logistic", "--progress",
                                               "-f", "bar.olm"], cwd=tmp_path)
    assert code == 0, shown
    assert "pass 1" in shown and "100%" in shown and f"{TRAIN_LINES:,} examples" in shown
    assert "average  since" not in shown          # no table
    assert "finished run" in shown                # the summary still follows
    plain = subprocess.run([sys.executable, "-m", "olcli", "train", data, "--loss", "logistic", "-f", "plain.olm"],
                           capture_output=True, cwd=tmp_path)
    assert plain.returncode == 0 and b"average  since" in plain.stderr
    assert (tmp_path / "bar.olm").read_bytes() == (tmp_path / "plain.olm").read_bytes()


def test_progress_bar_without_a_known_size_counts_examples(sample, tmp_path):
    with open(sample / "a9a_train.vw", "rb") as stdin:
        code, _, shown = run_with_terminal_stderr(["train", "-", "--progress"], stdin=stdin, cwd=tmp_path)
    assert code == 0, shown
    assert f"{TRAIN_LINES:,} examples" in shown
    assert "%" not in shown   # no total, so no percentage


def test_progress_off_a_terminal_shows_neither_table_nor_bar(cli, sample):
    code, _, err = cli("train", sample / "a9a_train.vw", "--progress", "--report", "r.json")
    assert code == 0
    assert "average  since" not in err and "\x1b[" not in err and "pass 1" not in err
    assert "finished run" in err
    assert json.load(open("r.json"))["examples"] == TRAIN_LINES


class _Recorder:
    """Stands in for ProgressBar and records what the run tells it."""

    made = []

    def __init__(self, stream):
        self.passes, self.calls, self.finished, self.closed = [], [], [], False
        _Recorder.made.append(self)

    def start_pass(self, number, total):
        self.passes.append((number, total))
        self.calls.append([])

    def advance(self, done, examples):
        self.calls[-1].append((done, examples))

    def finish_pass(self):
        self.finished.append(len(self.passes))

    def write(self, text):
        pass

    def close(self):
        self.closed = True


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_counts_bytes_on_disk_across_plain_and_compressed_files(sample, tmp_path, monkeypatch):
    lines = (sample / "a9a_train.vw").read_bytes()
    plain, gz, bz = tmp_path / "a.vw", tmp_path / "b.vw.gz", tmp_path / "c.vw.bz2"
    plain.write_bytes(lines[: len(lines) // 2].rsplit(b"\n", 1)[0] + b"\n")
    gz.write_bytes(gzip.compress(lines))
    bz.write_bytes(bz2.compress(lines))
    sources = [str(plain), str(gz), str(bz)]
    sizes = [os.path.getsize(p) for p in sources]
    assert input_size(sources) == sum(sizes)
    monkeypatch.setattr(sinks, "ProgressBar", _Recorder)
    _Recorder.made.clear()
    model = Learner(loss="logistic")
    result = run(model, RunOptions(sources=sources, learn=True, progress=True, chunk_bytes=50_000),
                 stderr=_Terminal())
    (bar,) = _Recorder.made
    assert bar.passes == [(1, sum(sizes))] and bar.finished == [1] and bar.closed
    done = [d for d, _ in bar.calls[0]]
    assert len(done) > 6 and done == sorted(done)
    assert done[-1] == sum(sizes)
    # Each file's last chunk ends at that file's size on disk.
    assert sizes[0] in done and sizes[0] + sizes[1] in done
    assert sum(n for _, n in bar.calls[0]) == result.report["examples"]


def test_later_passes_count_examples_against_the_first(sample, tmp_path, monkeypatch):
    monkeypatch.setattr(sinks, "ProgressBar", _Recorder)
    _Recorder.made.clear()
    model = Learner(loss="logistic")
    run(model, RunOptions(sources=[str(sample / "a9a_train.vw")], learn=True, progress=True, passes=3,
                          early_terminate=5, cache_path=str(tmp_path / "c.olcache")),
        stderr=_Terminal())
    (bar,) = _Recorder.made
    assert bar.passes == [(1, os.path.getsize(sample / "a9a_train.vw")), (2, TRAIN_LINES), (3, TRAIN_LINES)]
    assert all(done is None for calls in bar.calls[1:] for done, _ in calls)
    assert [sum(n for _, n in calls) for calls in bar.calls] == [TRAIN_LINES] * 3


def test_no_bar_when_stderr_is_not_a_terminal(sample, monkeypatch):
    monkeypatch.setattr(sinks, "ProgressBar", _Recorder)
    _Recorder.made.clear()
    model = Learner(loss="logistic")
    stderr = io.StringIO()
    run(model, RunOptions(sources=[str(sample / "a9a_train.vw")], learn=True, progress=True), stderr=stderr)
    assert _Recorder.made == [] and stderr.getvalue() == ""


@pytest.mark.parametrize("flags,code,examples", [
    ([], 0, 3), (["--skip-bad-lines"], 0, 3), (["--strict"], 1, 1), (["--strict", "--skip-bad-lines"], 0, 3),
    (["--skip-bad-lines", "--strict"], 1, 1)])
def test_strict_and_skip_bad_lines(cli, tmp_path, flags, code, examples):
    (tmp_path / "d.vw").write_text("1 |f a\n1 |f a:zz\n-1 |f b\n1 |f a\n")
    got, _, err = cli("train", "d.vw", *flags, "-f", "m.olm")
    assert got == code and "d.vw line 2" in err
    assert olcli.load("m.olm").counters["examples"] == examples
