"""The kernels' on-disk cache follows the whole engine (olcli/engine/jit.py): a change
to any engine file, not only to a kernel's own, makes a cached kernel compile again."""

import os
import shutil
import subprocess
import sys
import textwrap

import olcli
import olcli.engine
from olcli.engine import jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(olcli.__file__)))


_LOCATORS = textwrap.dedent("""
    import importlib, os, pkgutil
    import olcli.engine
    from numba.core.dispatcher import Dispatcher
    from olcli.engine import jit
    from olcli.kernel_stamp import EngineStamp
    assert jit.MODE == "jit", jit.MODE
    found = []
    for name in [f"olcli.engine.{m.name}" for m in pkgutil.iter_modules(olcli.engine.__path__)]:
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, Dispatcher) and value._cache.__class__.__name__ != "NullCache":
                found.append((name, value))
    assert len(found) >= 12, found
    for name, dispatcher in found:
        locator = dispatcher._cache._impl.locator
        assert isinstance(locator, EngineStamp), (name, dispatcher.__name__, type(locator))
        assert locator.get_source_stamp()[1] == jit.engine_stamp(os.path.abspath(locator._py_file))
    print(len(found))
""")


def test_every_cached_kernel_is_stamped_by_the_whole_engine():
    """Under the JIT (OLCLI_KERNELS=jit: the kernels compiled ahead of time, when built,
    are the default), every cached kernel has the engine's locator."""
    done = subprocess.run([sys.executable, "-c", _LOCATORS], env={**os.environ, "OLCLI_KERNELS": "jit"},
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) >= 12


def test_the_stamp_changes_with_any_engine_file(tmp_path):
    engine = tmp_path / "engine"
    shutil.copytree(os.path.dirname(jit.__file__), engine, ignore=shutil.ignore_patterns("__pycache__"))
    before = jit.stamp_of(str(engine))
    assert before == jit.stamp_of(os.path.dirname(jit.__file__))  # contents, not places or times
    losses = engine / "losses.py"
    text = losses.read_bytes()
    losses.write_bytes(text + b"\n# a comment\n")
    assert jit.stamp_of(str(engine)) != before
    losses.write_bytes(text)
    assert jit.stamp_of(str(engine)) == before
    (engine / "extra.py").write_text("X = 1\n")
    assert jit.stamp_of(str(engine)) != before


def test_the_stamp_reads_the_engine_modules_only_not_hidden_files(tmp_path):
    """The stamp hashes what ``*.py`` names (as the package's modules are found: the build's stamp, taken
    in the source tree, must equal the installed package's): a hidden file beside the modules, such as
    an editor's lock file (Emacs' ``.#driver.py``, a symbolic link to nowhere) or macOS's ``._driver.py``,
    changes nothing and stops nothing."""
    engine = tmp_path / "engine"
    shutil.copytree(os.path.dirname(jit.__file__), engine, ignore=shutil.ignore_patterns("__pycache__"))
    before = jit.stamp_of(str(engine))
    os.symlink("user@host.1234:1700000000", engine / ".#driver.py")
    (engine / "._driver.py").write_bytes(b"\x00\x05\x16\x07")
    assert jit.stamp_of(str(engine)) == before


_PROBE = textwrap.dedent("""
    import numpy as np
    from olcli.engine.parse import count_lines_and_examples as kernel
    print(kernel(np.frombuffer(b"1 |a b\\n\\n", np.uint8)), kernel.stats.cache_hits.total(),
          kernel.stats.cache_misses.total())
""")


def test_a_changed_dependency_recompiles_a_cached_kernel(tmp_path):
    # A copy of olcli whose cache lives in tmp_path; the kernel (the line counter of
    # engine/parse.py) calls nothing from engine/losses.py, so with Numba's own stamp
    # (its own file's) a change to losses.py would leave it cached.
    shutil.copytree(os.path.join(ROOT, "olcli"), tmp_path / "olcli",
                    ignore=shutil.ignore_patterns("__pycache__", "_aot_kernels*"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "OLCLI_KERNELS": "jit"}

    def probe():
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        words = done.stdout.split()
        return words[0] + " " + words[1], int(words[2]), int(words[3])

    counts, hits, misses = probe()
    assert counts == "(2, 1)" and (hits, misses) == (0, 1)   # compiled, written to the cache
    assert probe()[1:] == (1, 0)                              # loaded from it
    losses = tmp_path / "olcli" / "engine" / "losses.py"
    losses.write_bytes(losses.read_bytes() + b"\n# changed\n")
    assert probe()[1:] == (0, 1)                              # compiled again
    assert probe()[1:] == (1, 0)
