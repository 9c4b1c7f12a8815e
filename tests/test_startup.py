"""Start-up and compilation: what the olcli command imports, that the
kernels it loads from Numba's cache behave exactly as Numba's own loading does, and
``olcli warm`` with the "compiling kernels" notice.

Every check runs the real command in a subprocess. Timing is not tested here (the
machine is shared); benchmarks/bench_vs_vw.py measures it against the Numba floor
and VW in one run.
"""

import os
import pty
import subprocess
import sys

import pytest

from conftest import SAMPLE

NOTICE = "compiling kernels (once"

# Never on the way to --help or --version: the engine and every optional extra.
HEAVY = ("numpy", "numba", "llvmlite", "pydantic", "scipy", "sklearn", "starlette", "uvicorn", "httpx",
         "dask", "distributed", "matplotlib", "plotext")


def _imported(args, env=None) -> tuple:
    """(exit code, stdout, the top-level names of every module the command imported)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "olcli", *args], capture_output=True,
                          env=env, timeout=600)
    modules = set()
    for line in done.stderr.decode(errors="replace").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            modules.add(line.rsplit("|", 1)[1].strip())
    return done.returncode, done.stdout.decode(errors="replace"), modules


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["train", "--help"], ["test", "--help"],
                                  ["warm", "--help"], []])
def test_help_and_version_import_neither_numpy_nor_numba_nor_extras(args):
    code, out, modules = _imported(args)
    assert code == (2 if args == [] else 0)  # no arguments: the help, as a usage error (click)
    assert ("olcli 0." in out) if args == ["--version"] else ("Usage" in out)
    assert "olcli.cli" in modules  # the listing is real
    heavy = sorted(name for name in modules if name.split(".")[0] in HEAVY)
    assert heavy == []


JIT = {**os.environ, "OLCLI_KERNELS": "jit"}   # Numba's JIT, not the kernels compiled ahead of time


def test_train_imports_no_pydantic_and_loads_kernels_without_numba_registries(tmp_path):
    data = str(SAMPLE / "a9a_train.vw")
    args = ["train", data, "--loss", "logistic", "--quiet", "-f", str(tmp_path / "m.olm")]
    assert _imported(args, JIT)[0] == 0  # compiles whatever the test cache lacks
    code, _, modules = _imported(args, JIT)
    assert code == 0
    assert "numba" in modules and "olcli.engine.parse" in modules  # it did load the engine
    assert not [name for name in modules if name.split(".")[0] == "pydantic"]
    # numba.np.arraymath comes with Numba's typing and lowering registries (and SciPy's
    # BLAS through it): a compiler's needs, not a cached kernel's.
    assert "numba.np.arraymath" not in modules
    assert "scipy.linalg" not in modules
    # numpy.ma comes with Numba's typing of an argument array (is it a masked array?):
    # olcli types exact ndarrays without that question. (NumPy 1.x imports numpy.ma itself,
    # in `import numpy`: only NumPy 2 shows what olcli avoids.)
    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        assert "numpy.ma" not in modules
    # Nor Numba's array module with its string support (numba.cpython.charseq), imported
    # only to rebuild the environments of np.empty and np.zeros in a cached kernel.
    assert "numba.np.arrayobj" not in modules and "numba.cpython.charseq" not in modules


def test_a_cbify_run_imports_no_numpy_ma():
    """``olcli vw --cbify`` through its chunk kernel: no numpy.ma either (NumPy 2's np.unique imports it on its
    first call without indices: ``state.unique_sorted`` is the project's unique)."""
    args = ["vw", "--cbify", "2", "--cb_explore_adf", "--epsilon", "0.05", "-d",
            str(SAMPLE / "cb" / "rcv1_multiclass_100.dat"), "--quiet"]
    code, _, modules = _imported(args)
    assert code == 0
    assert "olcli.engine.cb_loop" in modules   # it did run the kernel's module
    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        assert "numpy.ma" not in modules


# The olcli command run as `python -m olcli` runs it (its __main__), with the collector's state recorded as the
# command prepares its kernels (startup.prepare_kernels: loading), at its first parse (the data) and as it leaves.
_COLLECTOR = """
import gc, os, runpy, sys
from olcli import parsing, startup
seen = []
prepare, parse = startup.prepare_kernels, parsing.parse_chunk
def prepare_recorded(quiet):
    seen.append(gc.isenabled())
    prepare(quiet)
def parse_recorded(*args, **kwargs):
    if len(seen) == 1:
        seen.append(gc.isenabled())
    return parse(*args, **kwargs)
startup.prepare_kernels, parsing.parse_chunk = prepare_recorded, parse_recorded
leave = os._exit
def left(code):
    print("collector", seen, gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr, flush=True)
    leave(code)
os._exit = left
sys.argv = ["olcli", *sys.argv[1:]]
runpy.run_module("olcli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("args, deferred", [
    (["train", str(SAMPLE / "a9a_train.vw"), "--quiet"], True),
    (["vw", "--cbify", "2", "--cb_explore_adf", "-d", str(SAMPLE / "cb" / "rcv1_multiclass_100.dat"), "--quiet"], True),
    (["train", "--quiet", "--", str(SAMPLE / "a9a_train.vw")], False),   # typer's line ("--"): collector on
])
def test_the_command_loads_without_the_garbage_collector_and_runs_with_it(args, deferred):
    """A train or VW line of the command's fast path loads with the cyclic collector off (startup.defer_collection)
    and has it back, with what was loaded frozen, for its data (resume_collection); a line typer runs keeps it on."""
    done = subprocess.run([sys.executable, "-c", _COLLECTOR, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    line = [text for text in done.stderr.splitlines() if text.startswith("collector")][-1]
    if deferred:
        assert line == "collector [False, True] True True", line
    else:   # (what the fast path loaded before handing the line over is frozen, as the collector resumed)
        assert line.startswith("collector [True, True] True "), line


def test_olcli_test_loads_without_the_collector_and_reads_its_data_with_it(tmp_path):
    data, model = str(SAMPLE / "a9a_test.vw"), str(tmp_path / "m.olm")
    subprocess.run([sys.executable, "-m", "olcli", "train", str(SAMPLE / "a9a_train.vw"), "-f", model, "--quiet"],
                   check=True, timeout=600)
    done = subprocess.run([sys.executable, "-c", _COLLECTOR, "test", data, "-i", model, "--quiet"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "collector [False, True] True True", done.stderr


def test_a_program_that_imports_olcli_keeps_its_collector(tmp_path):
    """cli.main called by a program (not the command's process): the collector is never turned off."""
    script = ("import gc\nfrom olcli import cli, startup\nseen = []\nprepare = startup.prepare_kernels\n"
              "startup.prepare_kernels = lambda quiet: (seen.append(gc.isenabled()), prepare(quiet))\n"
              f"try:\n    cli.main(['train', {str(SAMPLE / 'a9a_train.vw')!r}, '--quiet'])\nexcept SystemExit:\n    pass\n"
              "print('collector', seen, gc.isenabled(), gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "collector [True] True 0", done.stdout


def test_bad_option_values_get_olcli_messages():
    for args, expected in ((["-b", "x"], "Error: --bits takes a whole number, not 'x'"),
                           (["--loss", "cubic"], "Error: --loss takes one of squared, logistic, hinge, absolute, "
                                                 "quantile, poisson; not 'cubic'"),
                           (["-l", "fast"], "Error: --learning-rate takes a number, not 'fast'"),
                           (["--passes", "three"], "Error: --passes takes a whole number, not 'three'"),
                           (["--threads", "0"], "Error: --threads must be at least 1, not 0")):
        done = subprocess.run([sys.executable, "-m", "olcli", "train", str(SAMPLE / "a9a_train.vw"), *args],
                              capture_output=True, timeout=600)
        assert done.returncode == 2
        assert expected in " ".join(done.stderr.decode().split())  # typer may wrap the line


def test_options_checked_here_mean_what_typer_made_of_them(tmp_path):
    """-l 0.25 --power-t 0 -b 12 --loss logistic --format vw given as text reach the
    model as the numbers and choices typer would make of them."""
    model = tmp_path / "m.olm"
    args = ["train", str(SAMPLE / "a9a_train.vw"), "--quiet", "-f", str(model), "-b", "12", "--loss", "logistic",
            "-l", "0.25", "--format", "vw", "-q", "ff", "--passes", "1"]
    assert subprocess.run([sys.executable, "-m", "olcli", *args], timeout=600).returncode == 0
    shown = subprocess.run([sys.executable, "-m", "olcli", "inspect", str(model)], capture_output=True,
                           timeout=600).stdout.decode()
    assert "bits: 12  loss: logistic" in shown
    assert "eta=0.25" in shown
    assert "interactions: ff" in shown


def test_kernels_loaded_without_the_refresh_give_the_same_bytes(tmp_path):
    """The same run with Numba's own loading (OLCLI_NUMBA_REFRESH=1) and with olcli's:
    the same model file, predictions and report numbers, for a binary and a multiclass
    run."""
    outputs = {}
    for mode in ("1", "0"):
        env = {**JIT, "OLCLI_NUMBA_REFRESH": mode}
        for name, extra, data in (("binary", ["--loss", "logistic", "--ftrl"], "a9a_train.vw"),
                                  ("classes", ["--oaa", "26", "-q", "ff"], "letter_train.vw")):
            model, predictions = tmp_path / f"{name}{mode}.olm", tmp_path / f"{name}{mode}.txt"
            done = subprocess.run([sys.executable, "-m", "olcli", "train", str(SAMPLE / data), *extra, "--quiet",
                                   "-f", str(model), "-p", str(predictions)], env=env, timeout=600)
            assert done.returncode == 0
            outputs[name, mode] = (model.read_bytes(), predictions.read_bytes())
    for name in ("binary", "classes"):
        assert outputs[name, "0"] == outputs[name, "1"]
        assert len(outputs[name, "0"][1]) > 1000


def _on_terminal(args, env) -> tuple:
    """Run olcli with stderr on a pseudo-terminal: (exit code, what it wrote there)."""
    main, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "olcli", *args], stdout=subprocess.DEVNULL,
                               stderr=terminal, stdin=subprocess.DEVNULL, env=env)
    os.close(terminal)
    written = b""
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the process closed the terminal's last descriptor
            break
        if not data:
            break
        written += data
    os.close(main)
    return process.wait(timeout=600), written.decode(errors="replace")


def test_warm_compiles_ahead_and_the_notice_shows_only_when_compiling(tmp_path):
    """In an empty Numba cache: ``olcli warm --algorithm adagrad`` compiles (adagrad's kernels
    and the parsers: a representative part of what ``olcli warm`` compiles); then train and
    test with --adagrad (VW and libsvm input, interactions, -p, several passes, --oaa) print
    no notice on a terminal, while the first --ftrl run (not warmed) prints it once, on
    stderr that is no terminal too, with the compile's seconds on their own line and out of
    ``elapsed seconds``; the second does not."""
    env = {**JIT, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "olcli", "warm", "--algorithm", "adagrad"], capture_output=True,
                          env=env, timeout=1800)
    assert done.returncode == 0, done.stderr.decode()
    report = done.stderr.decode()
    assert "phase 3/3" in report and "kernel compilations" in report
    # --algorithm: the chosen algorithm's kernels only (the last phase's other paths too)
    assert "everything:adagrad" in report and "everything:mix" not in report
    assert os.listdir(tmp_path / "cache")
    model = str(tmp_path / "m.olm")
    runs = [["train", str(SAMPLE / "a9a_train.vw"), "--adagrad", "--loss", "logistic", "-f", model, "-p",
             str(tmp_path / "p.txt")],
            ["test", str(SAMPLE / "a9a_test.vw"), "-i", model, "-p", str(tmp_path / "p.txt"), "--probabilities"],
            ["train", str(SAMPLE / "a9a_train.libsvm"), "--adagrad", "-q", "::", "--passes", "2", "--cache",
             str(tmp_path / "c.olcache")],
            ["train", str(SAMPLE / "letter_train.vw"), "--adagrad", "--oaa", "26", "-q", "ff"]]
    for args in runs:
        code, written = _on_terminal(args, env)
        assert code == 0, written
        assert "average loss" in written  # the terminal did receive stderr
        assert NOTICE not in written, args
    done = subprocess.run([sys.executable, "-m", "olcli", "train", str(SAMPLE / "a9a_train.vw"), "--ftrl"],
                          capture_output=True, env=env, timeout=1200)
    written = done.stderr.decode()
    assert done.returncode == 0
    assert written.count(NOTICE) == 1
    assert written.index(NOTICE) < written.index("average loss")
    summary = dict(line.split(" = ", 1) for line in written.splitlines() if " = " in line)
    compiling = float(summary["compiling kernels seconds"].split()[0])
    assert compiling > float(summary["elapsed seconds"])   # a compile takes seconds; 2,000 lines do not
    code, written = _on_terminal(["train", str(SAMPLE / "a9a_train.vw"), "--ftrl"], env)
    assert code == 0 and NOTICE not in written and "compiling kernels seconds" not in written
    code, written = _on_terminal(["train", str(SAMPLE / "a9a_train.vw"), "--coin", "--quiet"], env)
    assert code == 0 and NOTICE not in written  # --quiet: nothing on stderr, compiling or not


def test_warm_refuses_an_unknown_algorithm():
    done = subprocess.run([sys.executable, "-m", "olcli", "warm", "--algorithm", "nope"], capture_output=True,
                          timeout=600)
    assert done.returncode == 2
    assert "unknown algorithm 'nope'" in done.stderr.decode()


def test_a_contextual_bandit_line_gets_the_compile_notice(tmp_path):
    """Under Numba's JIT with an empty cache, a --cbify line (cb_run, not train's path)
    prints the one-line notice when its kernels compile, on stderr that is no terminal."""
    env = {**JIT, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "olcli", "vw", "--cbify", "26", "--cb_explore_adf", "--epsilon",
                           "0.05", "-d", str(SAMPLE / "letter_train.vw")], capture_output=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode().count("olcli: compiling kernels") == 1
