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
_SUITE_TMP = os.environ["OLCLI_SUITE_TMP"]
os.environ["TMPDIR"] = _SUITE_TMP
tempfile.tempdir = None


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
    if not left and os.environ.get("OLCLI_SUITE_TMP_OWNER") == str(os.getpid()):
        import shutil

        shutil.rmtree(_SUITE_TMP, ignore_errors=True)
    assert not left, f"tests left temporary files behind in {_SUITE_TMP}: {sorted(left)}"
