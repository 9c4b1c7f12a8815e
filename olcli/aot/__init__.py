"""olcli's kernels compiled ahead of time: called without importing Numba.

``olcli/aot/build.py`` compiles every kernel Python calls (the ``cache=True``
entry points: chunk parsers, the algorithms' ``run_chunk``..., the writers), for every
argument type the commands pass them (``aot_signatures.json``), into one extension
module, ``olcli.aot._aot_kernels``, with ``numba.pycc``: Numba's own compiler and
its runtime (NRT) linked into the module, so that importing and calling it needs
Python and NumPy only. The machine code is the code Numba's JIT makes of the same
functions for the same types, so the results are the same bytes (tests/test_aot.py).

In this mode (``jit.MODE == "aot"``) ``njit`` returns a ``Kernel`` in place of a Numba
dispatcher. Calling it from Python finds the compiled function for the arguments'
types (``value_key``, the types Numba's ``typeof`` would give them) and calls it; the
exported functions of a ``nogil`` kernel release the GIL as Numba's do. A call with
types the module does not hold is the fallback: Numba is imported then
(``activate_jit``), the kernel is compiled by Numba's JIT (its on-disk cache as
ever), with one line on stderr saying so. The helpers that are only ever called from
compiled code (``inline="always"`` and the rest) are ``Kernel`` objects too, never
called from Python; if the JIT compiles a kernel that calls them, each one gives
Numba its own dispatcher (``_numba_type_``), and the engine's ``@intrinsic`` and
``@overload`` definitions (``deferred``) are registered with Numba first.
"""

import marshal
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
EXTENSION = "olcli.aot._aot_kernels"
MANIFEST_NAME = "_aot_kernels.manifest"   # read_manifest / write_manifest

_lock = threading.RLock()
_state = {"exports": None, "jit": False, "notice": None, "stream": None}


# --- the types of arguments, as Numba's typeof gives them ---

def _layout(array) -> str:
    flags = array.flags
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"


_SCALARS = {bool: "bool", int: "int64", float: "float64", type(None): "none", bytes: "bytes"}


def value_key(value) -> str:
    """A string naming the Numba type of ``value`` (an argument a kernel takes from
    Python); the same string as ``type_key`` of that type. Raises KeyError for a
    value of a kind the compiled module never takes (the JIT then types it)."""
    kind = type(value)
    name = _SCALARS.get(kind)
    if name is not None:
        if kind is int and not -(1 << 63) <= value < (1 << 63):
            raise KeyError("int beyond int64")
        return name
    if kind.__module__ == "numpy":
        import numpy as np

        if kind is np.ndarray:
            flags = value.flags
            return (f"a({value.dtype.str},{value.ndim},{_layout(value)},"
                    f"{'r' if not flags.writeable else 'w'}{'' if flags.aligned else 'u'})")
        if isinstance(value, (np.integer, np.floating, np.bool_)):
            return "bool" if kind is np.bool_ else kind.__name__
        raise KeyError(kind.__name__)
    if isinstance(value, tuple):
        inner = ",".join(value_key(item) for item in value)
        if kind is tuple:
            return f"t({inner})"
        if hasattr(kind, "_fields"):
            return f"n({kind.__module__}.{kind.__qualname__};{inner})"
    raise KeyError(kind.__name__)


def args_key(args) -> str:
    return ";".join(value_key(value) for value in args) if args else ""


def kernel_name(py_func) -> str:
    return f"{py_func.__module__}:{py_func.__qualname__}"


# --- the compiled module ---

def location() -> str:
    """The folder of the compiled module and its manifest: ``OLCLI_AOT_DIR`` when set (a
    build elsewhere, e.g. the tests'), else this package's folder."""
    return os.environ.get("OLCLI_AOT_DIR") or HERE


def read_manifest(folder: str) -> dict:
    """The manifest of the build in ``folder``: {"stamp": the engine's stamp, "files": {part: the
    extension module's file name}, "kernels": {kernel name: {argument types' key: "part:symbol"}}}.
    It is written with ``marshal`` (dicts, strings), which every command reads as it starts without
    importing json (~1.5 ms of a start, with the regular expressions json compiles). Raises OSError,
    or ValueError for a file that is not a manifest."""
    with open(os.path.join(folder, MANIFEST_NAME), "rb") as f:
        raw = f.read()
    try:
        manifest = marshal.loads(raw)
    except (EOFError, TypeError) as exc:
        raise ValueError(f"not a manifest ({exc})") from None
    if not isinstance(manifest, dict):
        raise ValueError("not a manifest (not a dict)")
    return manifest


def write_manifest(folder: str, manifest: dict) -> None:
    """Write ``manifest`` (``read_manifest``'s form) into ``folder``."""
    with open(os.path.join(folder, MANIFEST_NAME), "wb") as f:
        f.write(marshal.dumps(manifest))


def candidates() -> list:
    """Where a build may be, in order: ``location()``; then, unless ``OLCLI_AOT_DIR`` is set,
    ``olcli/aot`` under every other ``sys.path`` entry: a source checkout run in place
    (``python -m pytest`` in it imports olcli from the checkout) uses the build that
    ``pip install .`` of that checkout put in site-packages. Only a build of these very
    engine sources is ever loaded (its manifest's stamp)."""
    first = location()
    if os.environ.get("OLCLI_AOT_DIR"):
        return [first]
    found = [first]
    for entry in sys.path:
        folder = os.path.join(entry or os.getcwd(), "olcli", "aot")
        if os.path.abspath(folder) != os.path.abspath(first) and os.path.isfile(os.path.join(folder, MANIFEST_NAME)):
            found.append(folder)
    return found


def find_build(stamp: str):
    """(folder, manifest) of the first current build among ``candidates()``, or (None, why not)."""
    why = None
    for folder in candidates():
        try:
            manifest = read_manifest(folder)
        except FileNotFoundError:
            why = why or "no ahead-of-time kernels were built (python -m olcli.aot.build)"
            continue
        except (OSError, ValueError) as exc:
            why = why or f"cannot read {os.path.join(folder, MANIFEST_NAME)}: {exc}"
            continue
        if manifest.get("stamp") != stamp:
            why = why or "the ahead-of-time kernels were built from other sources (rebuild: python -m olcli.aot.build)"
            continue
        return folder, manifest
    return None, why


def available(stamp: str) -> str:
    """'' when a compiled module built from these sources (the engine's ``stamp``) is found
    (``find_build``) and loads, else why not (for the notice)."""
    folder, manifest = find_build(stamp)
    if folder is None:
        return manifest
    try:
        modules = {part: _load(folder, part, file_name) for part, file_name in manifest["files"].items()}
        exports = {}
        for name, table in manifest["kernels"].items():
            exports[name] = {}
            for key, where in table.items():
                part, _, symbol = where.partition(":")
                exports[name][key] = getattr(modules[part], symbol)
    except (ImportError, KeyError, AttributeError) as exc:
        return f"cannot load the ahead-of-time kernels ({type(exc).__name__}: {exc})"
    _state["exports"] = exports
    _state["folder"] = folder
    return ""


def _load(folder: str, part: str, file_name: str):
    """The extension module ``_aot_kernels_<part>`` from ``folder``/``file_name``."""
    import importlib.machinery   # not importlib.util (~0.5 ms of a start): its module_from_spec is these lines

    name = f"{EXTENSION}_{part}"
    path = os.path.join(folder, file_name)
    if not os.path.exists(path):
        raise ImportError(f"{path} is missing")
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.machinery.ModuleSpec(name, loader, origin=path)
    spec.has_location = True
    module = loader.create_module(spec)
    module.__spec__, module.__loader__, module.__file__ = spec, loader, path
    loader.exec_module(module)
    sys.modules[name] = module
    return module


def _exports_of(py_func) -> dict:
    exports = _state["exports"] or {}
    return exports.get(kernel_name(py_func), {})


def exported(kernel, args):
    """The compiled module's function that serves ``kernel`` called with ``args`` (None when
    the module holds none for their types): for a caller that calls it many times with
    arguments of the same types, without ``Kernel.__call__``'s look-up each time."""
    if not isinstance(kernel, Kernel):
        return None
    try:
        return _exports_of(kernel.py_func).get(args_key(args))
    except KeyError:
        return None


# --- Kernel: what njit returns in this mode ---

def njit(*args, **options):
    """Numba's ``njit`` signature: ``@njit``, ``@njit(...)`` or ``njit(...)(function)``."""
    if args and callable(args[0]) and not options:
        return Kernel(args[0], {})
    return lambda function: Kernel(function, options)


class Kernel:
    """A kernel of the compiled module (module docstring); Numba's dispatcher on demand."""

    def __init__(self, py_func, options: dict):
        self.py_func = py_func
        self.targetoptions = {"nopython": True, **options}   # what Numba's inliner reads
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func
        self._table = None
        self._jit = None

    def __call__(self, *args):
        table = self._table
        if table is None:
            table = self._table = _exports_of(self.py_func)
        try:
            function = table.get(args_key(args))
        except KeyError:
            function = None
        if function is not None:
            return function(*args)
        return self.dispatcher()(*args)

    def dispatcher(self):
        """Numba's dispatcher of this kernel (imports Numba; compiles on its first call)."""
        if self._jit is None:
            with _lock:
                if self._jit is None:
                    activate_jit()
                    from numba import njit as numba_njit

                    from olcli.kernel_stamp import register_locators

                    register_locators()
                    self._jit = numba_njit(**{k: v for k, v in self.targetoptions.items() if k != "nopython"})(
                        self.py_func)
        return self._jit

    @property
    def _numba_type_(self):
        from numba.core import types

        return types.Dispatcher(self.dispatcher())

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __repr__(self):
        return f"<olcli kernel {kernel_name(self.py_func)} (ahead of time)>"


# --- what Numba needs when it compiles after all ---

class _Deferred:
    """An ``@intrinsic`` (or a name of Numba's) made real by ``activate_jit``."""

    def __init__(self, make):
        self._make = make

    def real(self):
        return self._make()


_deferred_overloads = []


def _deferred(make):
    """A _Deferred name, or the real one at once when the JIT is already active: activate_jit
    replaces the deferred names of the modules imported before it ran, so a module imported
    after it (an engine module first used once something was JIT-compiled) must get real ones."""
    return make() if _state["jit"] else _Deferred(make)


def intrinsic(*args, **options):
    from functools import partial

    if args and callable(args[0]) and not options:
        function = args[0]
        return _deferred(lambda: __import__("numba.extending", fromlist=["intrinsic"]).intrinsic(function))
    return partial(_intrinsic_with, options)


def _intrinsic_with(options, function):
    return _deferred(lambda: __import__("numba.extending", fromlist=["intrinsic"]).intrinsic(**options)(function))


def overload(target, **options):
    def register(implementation):
        with _lock:
            if _state["jit"]:
                from numba.extending import overload as numba_overload

                numba_overload(target, **options)(implementation)
            else:
                _deferred_overloads.append((target, options, implementation))
        return implementation
    return register


def numba_name(dotted: str):
    """A name of Numba's (``numba.carray``, ``numba.types``...) resolved when the JIT starts."""
    module, _, attribute = dotted.rpartition(".")
    return _deferred(lambda: getattr(__import__(module, fromlist=[attribute]), attribute))


def activate_jit() -> None:
    """Import Numba and make the engine compilable by it: every deferred name in the
    engine's modules replaced by the real one, every deferred overload registered."""
    with _lock:
        if _state["jit"]:
            return
        from numba.extending import overload as numba_overload

        for module_name, module in list(sys.modules.items()):
            if not module_name.startswith("olcli.") or module is None:
                continue
            names = vars(module)
            for name, value in list(names.items()):
                if isinstance(value, _Deferred):
                    names[name] = value.real()
        for target, options, implementation in _deferred_overloads:
            numba_overload(target, **options)(implementation)
        _listen_for_compiles()
        _state["jit"] = True


def _listen_for_compiles() -> None:
    from numba.core import event

    class Notice(event.Listener):
        def on_start(self, ev):
            _notice(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Notice())
    time_compiles()


_compiling = threading.local()
_compile_seconds = [0.0]


def time_compiles() -> None:
    """Count the seconds Numba's JIT spends compiling in this process (``compile_seconds``):
    the outermost compiles only (a kernel's compile includes its callees'). Imports Numba."""
    with _lock:
        if _state.get("timer"):
            return
        _state["timer"] = True
    import time

    from numba.core import event

    class Timer(event.Listener):
        def on_start(self, ev):
            depth = getattr(_compiling, "depth", 0)
            if depth == 0:
                _compiling.started = time.perf_counter()
            _compiling.depth = depth + 1

        def on_end(self, ev):
            _compiling.depth = max(getattr(_compiling, "depth", 1) - 1, 0)
            started = getattr(_compiling, "started", None)
            if _compiling.depth == 0 and started is not None:   # None: the timer began inside this compile
                with _lock:
                    _compile_seconds[0] += time.perf_counter() - started
                _compiling.started = None

    event.register("numba:compile", Timer())


def compile_seconds() -> float:
    """The seconds this process has spent compiling kernels at run time so far (0.0 with the
    kernels compiled ahead of time, unless one was missing)."""
    return _compile_seconds[0]


def _notice(name: str) -> None:
    """One line on stderr (terminal or not), once per process, when a kernel is compiled."""
    with _lock:
        if _state["notice"]:
            return
        _state["notice"] = True
    stream = _state["stream"] or sys.stderr
    try:
        stream.write(f"olcli: compiling {name} with Numba (not among the kernels compiled ahead of time "
                     f"for these argument types): this run takes longer, once per process\n")
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass
