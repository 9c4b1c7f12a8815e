"""olcli/fastpath.py: a plain train or test line read without typer means exactly what
typer makes of it, a contextual-bandit ``olcli vw`` line reaches olcli/cb_run.py with the words
typer hands it, and every other line is typer's (same output, same exit code).

In-process, each line's (data, options) from the fast path is compared with what typer's
command hands the same body (``cli_options.run_train``/``run_test``, replaced here by a recorder),
and so are the keywords they become. Then real commands run both ways (``OLCLI_FAST_PATH=0``
sends every line to typer): stdout, stderr (timings blanked), exit code and the files
written are the same bytes.
"""

import os
import re
import subprocess
import sys

import pytest

from conftest import SAMPLE

from olcli import cli_options, fastpath, startup

TRAIN = str(SAMPLE / "a9a_train.vw")
TEST = str(SAMPLE / "a9a_test.vw")

READ_HERE = [
    ["train", "a.vw"], ["train"], ["train", "a.vw", "b.vw", "--quiet"],
    ["train", "-", "-b", "12", "--loss", "logistic", "-l", "0.25"],
    ["train", "a", "-q", "ab", "-q", "cd", "--ignore", "x", "--ignore", "y", "--noconstant", "--skip-bad-lines"],
    ["train", "a", "--strict", "--format", "libsvm", "--threads", "1", "--passes", "3", "-f", "m", "-p", "-"],
    ["train", "a", "--ftrl", "--l1", "1e-3", "--adaptive", "--oaa", "3", "--initial-weight", "-0.5", "-C", ".5"],
    ["train", "-d", "a", "--final_regressor=m", "--loss_function", "hinge", "-qab", "-P", "10", "-c", "--quiet"],
    ["train", "a", "--progress", "--report", "r.json", "--hash", "all", "--hash-seed", "7", "--ngram", "2",
     "--skips", "1", "--cubic", "abc", "--interactions", "abcd", "--keep", "ab", "--ignore-linear", "c"],
    ["train", "a", "--cache", "--passes", "2"], ["train", "a", "--cache", "c.ol", "--passes", "2", "--holdout-off"],
    ["--traceback", "train", "a", "--bits=20", "--softmax", "4", "--indexing", "0", "--permutations"],
    ["train", "a", "--sparse_weights", "--holdout_after", "10", "--early-terminate", "2", "--holdout-period", "5"],
    ["train", "a", "-k", "-b18", "--quantile-tau", "0.3", "--loss", "quantile", "--min-prediction", "-1",
     "--max-prediction", "1e2", "--leave-duplicate-interactions"],
    ["train", "a", "--workers", "2", "--shards", "4", "--predict-only-model", "--audit", "--invert-hash", "x",
     "--readable-model", "y", "--scheduler", "tcp://127.0.0.1:1", "-i", "m0", "--vw-header"],
    ["train", "a", "--coin", "--coin-alpha", "2", "--power-t", "0", "--initial-t", "1", "--normalized",
     "--invariant", "--delta", "0.1", "--radius", "3", "--epsilon", "1", "--ftrl-beta", "1", "--coin-beta", "0.5"],
    ["train", "a", "-f", "--quiet"],   # -f takes the next word, whatever it is (as click does)
    ["test", "a", "-i", "m"], ["test", "-i", "m", "-p", "-", "--probabilities", "--loss", "squared", "--link",
                               "logistic", "--report", "r", "--threads", "1", "--format", "vw", "--strict"],
    ["test", "--initial-model=m", "a", "b", "--quantile-tau", "0.9", "--audit", "--quiet", "--progress"],
]

# typer's to run: help, errors (its words), spellings only typer coerces, test mode, bandits.
TYPERS = [
    ["--help"], [], ["--version"], ["train", "--help"], ["test", "a", "--help"], ["train", "a", "-f", "--help"],
    ["inspect", "m"], ["vw", "-d", "a"], ["warm"], ["serve", "-i", "m"], ["nope"], ["--traceback"],
    ["train", "a", "--bogus"], ["train", "a", "-b", "x"], ["train", "a", "-b", "nan"], ["train", "a", "-l", "nan"],
    ["train", "a", "-l", "1_000"], ["train", "a", "--loss", "Logistic"], ["train", "a", "--threads", "0"],
    ["train", "a", "-b", "12", "-b", "13"], ["train", "a", "--quiet", "--quiet"], ["train", "a", "--", "b"],
    ["train", "a", "-f"], ["train", "a", "--quiet=1"], ["train", "a", "-t", "-i", "m"], ["test", "a"],
    ["test", "a", "-t", "-i", "m"], ["train", "a", "-1"], ["train", "--cb_explore_adf", "a"],
    ["train", "a", "--lda", "3"], ["train", "a", "--noconstantx"], ["train", "a\udcff"],
    ["train", "a", "-b", "99999999999999999999"], ["train", "a", "-kb"], ["--version", "train", "a"],
]


@pytest.fixture
def recorded(monkeypatch):
    """What the bodies of train and test are handed: (command, data, options)."""
    calls = []
    monkeypatch.setattr(cli_options, "run_train", lambda ctx, data, flags: calls.append(("train", data, dict(flags))))
    monkeypatch.setattr(cli_options, "run_test", lambda data, initial_model, flags: calls.append(
        ("test", data, dict(flags, initial_model=initial_model))))
    return calls


def _typer(args, recorded):
    from olcli.cli_app import app

    recorded.clear()
    try:
        startup.invoke(app, list(args))
    except SystemExit:
        pass
    return recorded[0] if recorded else None


@pytest.mark.parametrize("args", READ_HERE, ids=" ".join)
def test_a_plain_line_means_what_typer_makes_of_it(args, recorded):
    fast = fastpath.parse(list(args))
    assert fast is not None, "read by typer, not here"
    by_typer = _typer(args, recorded)
    assert by_typer is not None
    assert fast[:2] == by_typer[:2]
    assert fast[2] == by_typer[2]   # typer's choices are str Enums: equal to their values
    assert {name: type(value) for name, value in fast[2].items() if not isinstance(value, str)} == {
        name: type(value) for name, value in by_typer[2].items() if not isinstance(value, str)}
    command, data, flags = fast
    if command == "train":
        assert cli_options.train_keywords(data, flags) == cli_options.train_keywords(data, by_typer[2])
    else:
        assert cli_options.test_keywords(data, "m", flags) == cli_options.test_keywords(data, "m", by_typer[2])


@pytest.mark.parametrize("args", TYPERS, ids=" ".join)
def test_every_other_line_is_typers(args):
    assert fastpath.parse(list(args)) is None


# olcli vw with a contextual-bandit line: run here (cb_run.run with the same words), or typer's
CB_HERE = [
    ["vw", "--cbify", "26", "--cb_explore_adf", "--epsilon", "0.05", "-d", "a", "--quiet"],
    ["vw", "--cb_explore_adf", "-d", "a", "-p", "-", "--squarecb", "--gamma_scale=10"],
    ["--traceback", "vw", "--cb", "3", "a", "-f", "m"], ["vw", "--cb-adf", "a", "--bogus"],
    ["vw", "-d", "a", "--cb_adf", "--cb_type", "dr", "-q", "ab"],
]
CB_TYPERS = [
    ["vw", "--cb_explore_adf", "-d", "a", "--help"], ["vw", "--cb_explore_adf", "-h"],
    ["vw", "--cb_explore_adf", "-ch"], ["vw", "--cb_explore_adf", "--help=1"], ["vw", "--cb_explore_adf", "--", "a"],
    ["vw", "--cb_explore_adf", "-i", "m"], ["vw", "--cb_explore_adf", "--initial_regressor=m"],
    ["vw", "--cb_explore_adf", "a\udcff"], ["vw", "-d", "a"], ["vw"], ["train", "--cb_explore_adf", "a"],
]


@pytest.mark.parametrize("args", CB_HERE, ids=" ".join)
def test_a_bandit_line_is_what_typer_hands_cb_run(args, monkeypatch):
    from olcli import cb_run
    from olcli.cli_app import app

    handed = []
    monkeypatch.setattr(cb_run, "run", lambda words: handed.append(list(words)))
    words = fastpath.cb_line(list(args))
    assert words is not None, "typer's, not read here"
    try:
        startup.invoke(app, list(args))
    except SystemExit:
        pass
    assert handed == [words]


@pytest.mark.parametrize("args", CB_TYPERS, ids=" ".join)
def test_every_other_vw_line_is_typers(args):
    assert fastpath.cb_line(list(args)) is None


def test_the_spellings_vw_rewrite_is_told_are_the_typer_commands():
    import typer.main

    from olcli.cli_app import _known_options, app

    group = typer.main.get_command(app)
    for command in ("train", "test"):
        assert fastpath.spec(command).known() == _known_options(group.commands[command]), command


def _imported(args: list) -> set:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "olcli", *args], capture_output=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in done.stderr.decode().splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def test_a_plain_train_imports_neither_typer_nor_click_nor_rich(tmp_path):
    modules = _imported(["train", TRAIN, "--quiet", "-f", str(tmp_path / "m.olm")])
    assert "olcli" in modules and not modules & {"typer", "click", "rich", "pydantic"}
    assert "typer" in _imported(["train", "--help"])


def test_a_bandit_line_imports_neither_typer_nor_click_nor_rich():
    modules = _imported(["vw", "--cbify", "26", "--cb_explore_adf", "-d", str(SAMPLE / "letter_train.vw"), "--quiet"])
    assert "olcli" in modules and not modules & {"typer", "click", "rich", "pydantic"}


_TIMES = re.compile(rb"((?:elapsed|compiling kernels) seconds = |examples per second = |\"(?:elapsed_seconds|"
                    rb"examples_per_second|compile_seconds|seconds)\": )[0-9.e+-]+")

# a kernel compiled on the way (the JIT, with a cold cache) is said by whichever run comes first
_COMPILING = re.compile(rb"(?m)^(?:olcli: compiling kernels .*|compiling kernels seconds = .*"
                        rb"| *\"compile_seconds\": .*)\n")

# Real runs both ways; the words in {} are files in the run's folder (compared after the run).
RUNS = [
    ["train", TRAIN, "-f", "{m.olm}", "-p", "{p.txt}", "--loss", "logistic", "--report", "{r.json}"],
    ["train", TRAIN, "-b", "12", "-q", "ff", "--ftrl", "--l1", "1e-4", "--quiet", "-f", "{m.olm}", "-p", "-"],
    ["train", TRAIN, "--passes", "2", "--cache", "{c.olcache}", "--holdout-off", "--readable-model", "{r.txt}"],
    ["train", "-d", TRAIN, "--loss_function", "hinge", "-P", "100", "--final_regressor", "{m.olm}"],
    ["test", TEST, "-i", str(SAMPLE / "vw" / "missing.olm")],
    ["train", str(SAMPLE / "vw_0001.dat"), "--strict"],
    ["train", TRAIN, "-b", "40"], ["train", TRAIN, "--threads", "0"], ["train", "--bogus"], ["train", "--help"],
    ["train", str(SAMPLE / "does-not-exist.vw")], ["train", TRAIN, "--oaa", "3", "--softmax", "3"],
    ["train", TRAIN, "-q", "abc"], ["test", TEST],
    ["vw", "--cbify", "26", "--cb_explore_adf", "--epsilon", "0.1", "-d", str(SAMPLE / "letter_train.vw"),
     "-p", "{p.txt}", "-f", "{m.olm}", "--report", "{r.json}"],
    ["vw", "--cbify", "26", "--cb_explore_adf", "--squarecb", "-d", str(SAMPLE / "letter_train.vw"), "-P", "100"],
    ["vw", "--cb_explore_adf", "-d", str(SAMPLE / "cb" / "cb_test.ldf"), "-p", "-", "--cb_type", "mtr"],
    ["vw", "--cb", "2", "-d", str(SAMPLE / "cb" / "cb_multi_cost.dat"), "--bogus"],
    ["vw", "--cbify", "26", "--cb_explore_adf", "-d", str(SAMPLE / "does-not-exist.vw")],
]


def _run(args: list, folder, env) -> tuple:
    folder.mkdir()
    words = [os.path.join(folder, word[1:-1]) if word.startswith("{") else word for word in args]
    done = subprocess.run([sys.executable, "-m", "olcli", *words], capture_output=True, cwd=folder,
                          env={**env, "COLUMNS": "100"}, timeout=900)
    blank = lambda text: _COMPILING.sub(b"", _TIMES.sub(rb"\1T", text.replace(str(folder).encode(), b"DIR")))  # noqa: E731
    files = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as handle:
            files[name] = blank(handle.read())
    return done.returncode, blank(done.stdout), blank(done.stderr), files


@pytest.mark.parametrize("number", range(len(RUNS)))
def test_real_runs_give_the_same_bytes_both_ways(number, tmp_path):
    args = RUNS[number]
    fast = _run(args, tmp_path / "fast", os.environ)
    slow = _run(args, tmp_path / "typer", {**os.environ, "OLCLI_FAST_PATH": "0"})
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    assert fast[2] == slow[2]
    assert fast[3] == slow[3]
