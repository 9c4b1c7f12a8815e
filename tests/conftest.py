import hashlib
import io
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"


def _engine_cache_dir() -> str:
    """Numba's cache notices when a kernel's own file changes, but not when a
    kernel it calls (in another file) does, and would run stale code. The tests
    therefore use a cache directory named after a hash of all engine sources."""
    import olcli

    engine = Path(olcli.__file__).parent / "engine"
    digest = hashlib.sha256()
    for path in sorted(engine.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return os.path.join(tempfile.gettempdir(), f"olcli-numba-{digest.hexdigest()[:16]}")


# Before anything imports numba; subprocesses started by the tests inherit it.
os.environ.setdefault("NUMBA_CACHE_DIR", _engine_cache_dir())

# The suite's own temporary directory (the tests' processes inherit TMPDIR), so that the check
# below for olcli temporaries left behind sees only the suite's, not those of other olcli
# processes running on the machine at the same time.
# Made once per test run: this module is imported again as `tests.conftest` or `conftest` by
# tests that take its constants, and a run of pytest that a test starts inherits the folder.
if "OLCLI_SUITE_TMP" not in os.environ:
    os.environ["OLCLI_SUITE_TMP"] = tempfile.mkdtemp(prefix="st-")
    os.environ["OLCLI_SUITE_TMP_OWNER"] = str(os.getpid())
# pytest-xdist's workers (-n 2, pyproject.toml) run at the same time: each has a folder of its
# own inside the run's (gw0, gw1, ...), so that its check sees only its own tests' files.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_SUITE_TMP = os.path.join(os.environ["OLCLI_SUITE_TMP"], _WORKER) if _WORKER else os.environ["OLCLI_SUITE_TMP"]
os.makedirs(_SUITE_TMP, exist_ok=True)
os.environ["TMPDIR"] = _SUITE_TMP
tempfile.tempdir = None


# The longest tests (seconds of a run on two cores, most of it Numba compiling), with pytest-xdist:
# they start first, shared between the two workers by their cost, so that neither worker is left
# with one of them at the end while the other has nothing to do (test_aot's cases stay on one
# worker: they compile the same kernels with the JIT, which two workers would do twice).
# A key of several prefixes is one unit: its tests run one after the other on one worker,
# the later ones loading from Numba's cache what the first compiled (test_aot's JIT runs
# compile --ftrl and the default's --oaa loop that test_kernels_loaded_... runs again;
# the three mix-v1 tests compile the same JIT-only kernels).
_LONG = {("tests/test_aot.py::", "tests/test_startup.py::test_kernels_loaded_without_the_refresh"): 320,
         "tests/test_startup.py::test_warm_compiles": 140,
         "tests/test_mixture_v1.py::test_an_old_default_model": 60,
         "tests/test_docs_examples.py::test_examples[README.md]": 60,
         "tests/test_robustness.py::test_fuzz_tests_pass_with_numba_boundscheck": 55,
         "tests/test_features.py::test_interaction_indices_equal_vw_audit": 45,
         "tests/test_serve.py::test_multiclass_http_probabilities": 40,
         "tests/test_scaleout.py::test_one_shard_on_one_worker": 35,
         "tests/test_scaleout.py::test_several_passes_with_holdout": 30,
         "tests/test_serve.py::test_single_example_parser_fills": 30}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (its worksteal scheduling gives the first half of the list to one
    worker and the second half to the other, then moves tests from a busy worker's end to an
    idle one), the long tests first in each half, split between the halves by their cost."""
    if not _WORKER or len(items) < 4:
        return
    units = {}
    rest = []
    for item in items:
        prefix = next((p for p in _LONG if item.nodeid.startswith(p)), None)
        (units.setdefault(prefix, []) if prefix else rest).append(item)
    halves, costs = ([], []), [0, 0]
    for prefix in sorted(units, key=lambda p: -_LONG[p]):
        k = 0 if costs[0] <= costs[1] else 1
        halves[k].extend(units[prefix])
        costs[k] += _LONG[prefix]
    split = max(0, len(items) // 2 - len(halves[0]))
    items[:] = halves[0] + rest[:split] + halves[1] + rest[split:]


# Tests that hold a promise to the wall clock (a SIGTERM obeyed within a second, a client that
# does not read delaying no one): under pytest-xdist each runs alone, the other worker waiting
# between two of its own tests (a shared lock each test holds; these take it exclusively).
_ALONE = ("tests/test_safety_signals.py::test_quadratic_oaa_on_wide_lines_stops_within_a_second",
          "tests/test_safety_signals.py::test_seven_wildcards_over_many_namespaces_stop_within_a_second",
          "tests/test_serve.py::test_a_client_that_does_not_read_blocks_no_one")


@pytest.fixture(autouse=True)
def _alone_when_timed(request):
    if not _WORKER:
        yield
        return
    import fcntl

    with open(os.path.join(os.environ["OLCLI_SUITE_TMP"], "alone.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if request.node.nodeid.startswith(_ALONE) else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def sample():
    return SAMPLE


@pytest.fixture
def cli(monkeypatch, capsysbinary):
    """Run olcli's real entry point in-process: returns (exit code, stdout bytes, stderr text)."""
    from olcli.cli import main

    def invoke(*args, stdin: bytes = b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsysbinary.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsysbinary.readouterr()
        return code, out, err.decode("utf-8", errors="replace")

    return invoke


@pytest.fixture(autouse=True)
def _no_stray_files(tmp_path, monkeypatch):
    """Every test runs in its own directory, so none leaves files behind in the repo."""
    monkeypatch.chdir(tmp_path)
    yield


def _olcli_temporaries() -> set:
    """olcli's temporary files in the system temp directory (the numba cache aside)."""
    directory = tempfile.gettempdir()
    return {name for name in os.listdir(directory) if name.startswith("olcli-") and not name.startswith("olcli-numba-")}


@pytest.fixture(autouse=True, scope="session")
def _no_temporary_files_left():
    before = _olcli_temporaries()
    yield
    left = _olcli_temporaries() - before
    assert not left, f"tests left temporary files behind in {_SUITE_TMP}: {sorted(left)}"


def pytest_unconfigure(config):
    """The process that made the run's folder removes it at the end (with xdist, the workers'
    folders inside it too), unless a test left olcli temporaries there (kept to be looked at)."""
    top = os.environ["OLCLI_SUITE_TMP"]
    if _WORKER or os.environ.get("OLCLI_SUITE_TMP_OWNER") != str(os.getpid()) or not os.path.isdir(top):
        return
    folders = [top] + [os.path.join(top, name) for name in os.listdir(top) if name.startswith("gw")]
    for folder in folders:
        if any(name.startswith("olcli-") and not name.startswith("olcli-numba-") for name in os.listdir(folder)):
            return
    import shutil

    shutil.rmtree(top, ignore_errors=True)
