import io
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"


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
