"""``njit`` for olcli's kernels, with an on-disk cache that follows the whole engine.

Numba's cache (``cache=True``) keeps a kernel's machine code with a stamp of the
file that defines it, and reuses it while that file is unchanged. A cached kernel's
code also holds every function it calls (losses.py, features.py, driver.py, ...):
when one of those changed and the kernel's own file did not, Numba loaded the old
code — a stale kernel that silently computed what the engine no longer says (it
happened while developing: a fixed division by zero came back from the cache).

Here every olcli kernel's stamp is the SHA-256 of all of ``olcli/engine/*.py``
(and of its own file, for a kernel defined elsewhere in olcli), so a change to any
engine file makes every cached kernel recompile once. Installed copies are not
changed by this: an upgrade rewrites the files, and their stamps change anyway.
Where the cache lives is Numba's choice as before (``NUMBA_CACHE_DIR``, else the
``__pycache__`` beside the sources, else the user's cache directory); only the
stamp differs. Kernels of other packages keep Numba's own locators.

Every module that defines a ``cache=True`` kernel imports ``njit`` from here
(before its decorators run, which is when Numba picks a kernel's locator);
tests/test_engine.py checks that each cached kernel has the engine's locator.

Which kernels a process runs (``MODE``, decided when the engine is first imported):
``"aot"``, the kernels compiled ahead of time (olcli/aot: no Numba imported unless
a call needs a type the compiled module lacks), or ``"jit"``, Numba's JIT as above.
The environment variable ``OLCLI_KERNELS`` chooses: ``jit`` (the development path:
edit a kernel, run it), ``aot`` (the compiled module when it was built from these
very sources, else the JIT with a one-line notice saying why). Unset (the default):
the compiled module when it is there and built from these very sources, else the JIT
(a source checkout whose engine was edited since its last ``python -m olcli.aot.build``,
or an install built without a C compiler). Whenever the JIT compiles a kernel, one
line on stderr says so (``compile_notice``). The engine modules take
``njit``, ``intrinsic``, ``overload`` and Numba's names from here, so that in the
``aot`` mode none of them imports Numba.
"""

import functools
import glob
import hashlib
import os
import sys

__all__ = ["njit", "intrinsic", "overload", "MODE", "engine_stamp", "stamp_of"]

ENGINE = os.path.dirname(os.path.abspath(__file__))
OLCLI = os.path.dirname(ENGINE)


@functools.lru_cache(maxsize=None)
def engine_stamp(own_file: str = "") -> str:
    """The stamp of olcli's kernels (``stamp_of`` the engine), computed once per process."""
    return stamp_of(ENGINE, own_file)


def stamp_of(engine: str, own_file: str = "") -> str:
    """SHA-256 of ``engine``/*.py (names and contents, in name order), and of
    ``own_file`` when it is outside that directory."""
    digest = hashlib.sha256()
    paths = sorted(glob.glob(os.path.join(engine, "*.py")))
    if own_file and os.path.dirname(own_file) != engine:
        paths.append(own_file)
    for path in paths:
        with open(path, "rb") as source:
            content = source.read()
        digest.update(os.path.basename(path).encode() + b"\0" + len(content).to_bytes(8, "little") + content)
    return digest.hexdigest()


class _EngineStamp:
    """A locator mixin: olcli's files are stamped by the whole engine (module docstring)."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(OLCLI + os.sep):
            return None  # not olcli's: Numba's own locators decide
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        own_file = os.path.abspath(self._py_file)
        if os.path.dirname(own_file) == ENGINE:
            own_file = ""  # the same stamp for every engine file: computed once, not once per module
        return ("olcli-engine", engine_stamp(own_file))


def _numba_class(*names):
    from numba.core import caching

    for name in names:  # Numba 0.68 names them without the underscore
        found = getattr(caching, name, None)
        if found is not None:
            return found
    return None


def register_locators() -> None:
    """olcli's locators ahead of Numba's (module docstring)."""
    from numba.core import caching

    impl = _numba_class("CacheImpl", "_CacheImpl")
    if getattr(impl, "_olcli_engine_stamp", False):
        return
    ours = []
    for names in (("UserProvidedCacheLocator", "_UserProvidedCacheLocator"),
                  ("InTreeCacheLocator", "_InTreeCacheLocator"),
                  ("UserWideCacheLocator", "_UserWideCacheLocator")):
        base = _numba_class(*names)
        if base is not None:
            ours.append(type("Olcli" + base.__name__.lstrip("_"), (_EngineStamp, base), {}))
    impl._locator_classes = ours + list(impl._locator_classes)
    impl._olcli_engine_stamp = True


def _mode() -> tuple:
    """(mode, why the compiled kernels are not used when ``OLCLI_KERNELS=aot`` asked for them, or '')."""
    asked = os.environ.get("OLCLI_KERNELS", "").strip().lower()
    if asked == "jit":
        return "jit", ""
    from olcli import aot

    why = aot.available(engine_stamp())
    if not why:
        return "aot", ""
    return "jit", why if asked == "aot" else ""


MODE, WHY_NOT_AOT = _mode()

if MODE == "aot":
    from olcli.aot import intrinsic, njit, numba_name, overload

    types = numba_name("numba.types")
    cgutils = numba_name("numba.core.cgutils")
    carray = numba_name("numba.carray")
else:
    from numba import carray, njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    register_locators()
    from olcli import aot as _aot

    _aot.time_compiles()
    if WHY_NOT_AOT:
        sys.stderr.write(f"olcli: OLCLI_KERNELS=aot, but {WHY_NOT_AOT}: using Numba's JIT\n")
