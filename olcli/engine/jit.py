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
"""

import functools
import glob
import hashlib
import os

from numba import njit
from numba.core import caching

__all__ = ["njit", "engine_stamp", "stamp_of"]

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
    for name in names:  # Numba 0.68 names them without the underscore
        found = getattr(caching, name, None)
        if found is not None:
            return found
    return None


def _register() -> None:
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


_register()
