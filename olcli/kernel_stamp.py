"""The stamp of olcli's kernels, and Numba cache locators that use it.

Numba's cache (``cache=True``) keeps a kernel's machine code with a stamp of the
file that defines it, and reuses it while that file is unchanged. A cached kernel's
code also holds every function it calls (losses.py, features.py, driver.py, ...):
when one of those changed and the kernel's own file did not, Numba would load the
old code, a stale kernel computing what the engine no longer says. So every olcli
kernel's stamp is the BLAKE2b digest of all of ``olcli/engine/*.py`` (and of its own file,
for a kernel defined elsewhere in olcli), and a change to any engine file makes
every cached kernel recompile once (``register_locators``: olcli's locators ahead of
Numba's; where the cache lives stays Numba's choice, only the stamp differs; kernels
of other packages keep Numba's own locators). The kernels compiled ahead of time
(olcli/aot) record the same stamp and are used only by sources that have it.

This module is below both the engine's ``njit`` (olcli/engine/jit.py) and the
ahead-of-time loader (olcli/aot), which both take the stamp from here.
"""

import functools
import os

try:
    from _blake2 import blake2b   # hashlib's own BLAKE2b, without importing hashlib (OpenSSL: olcli/digest.py)
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine")
OLCLI = os.path.dirname(ENGINE)


@functools.lru_cache(maxsize=None)
def engine_stamp(own_file: str = "") -> str:
    """The stamp of olcli's kernels (``stamp_of`` the engine), computed once per process."""
    return stamp_of(ENGINE, own_file)


def stamp_of(engine: str, own_file: str = "") -> str:
    """BLAKE2b (32 bytes) of ``engine``/*.py (names and contents, in name order), and of
    ``own_file`` when it is outside that directory. Every command computes it as it starts
    (the compiled kernels are used only when it matches theirs), so the hash is the fastest
    one the interpreter has built in: BLAKE2b hashes the engine's ~390 KB in ~0.5 ms, SHA-256
    in ~1.3 ms."""
    digest = blake2b(digest_size=32)
    # what glob's *.py names (and the package's modules are): not a hidden file such as an editor's lock
    # file (.#driver.py, a link to nowhere) or macOS's ._driver.py, which the installed package lacks
    paths = sorted(os.path.join(engine, name) for name in os.listdir(engine)
                   if name.endswith(".py") and not name.startswith("."))
    if own_file and os.path.dirname(own_file) != engine:
        paths.append(own_file)
    for path in paths:
        with open(path, "rb") as source:
            content = source.read()
        digest.update(os.path.basename(path).encode() + b"\0" + len(content).to_bytes(8, "little") + content)
    return digest.hexdigest()


class EngineStamp:
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
    impl = _numba_class("CacheImpl", "_CacheImpl")
    if getattr(impl, "_olcli_engine_stamp", False):
        return
    ours = []
    for names in (("UserProvidedCacheLocator", "_UserProvidedCacheLocator"),
                  ("InTreeCacheLocator", "_InTreeCacheLocator"),
                  ("UserWideCacheLocator", "_UserWideCacheLocator")):
        base = _numba_class(*names)
        if base is not None:
            ours.append(type("Olcli" + base.__name__.lstrip("_"), (EngineStamp, base), {}))
    impl._locator_classes = ours + list(impl._locator_classes)
    impl._olcli_engine_stamp = True
