"""The olcli command's first half-second: what it costs and how it is kept small.

A run of ``olcli train`` on a small file is mostly start-up. Measured on a 2-core VM
with a warm kernel cache (CPU seconds): Python and NumPy/Numba's imports ~0.33 (the
"Numba floor", ``python -c "import numba, numpy"``), and on top of that, before this
module: typer checking each option's value with a pydantic ``TypeAdapter`` (importing
pydantic and building ~40 adapters) ~0.06, and Numba refreshing its target context
before the first cached kernel is loaded ~0.27 (importing every typing and lowering
registry, and through numba.np.arraymath SciPy's BLAS when SciPy is installed).
Two things remove most of it:

- ``invoke``: the options' values (str, int, float, bool, lists of str, enums: all
  olcli has) are checked here for the plain spellings; anything else — a malformed
  number, an unknown choice, a value out of range — is refused in olcli's words
  (``--passes takes a whole number, not 'three'``), and anything else (a name that is
  not valid UTF-8) goes to typer's own check. Values are the same objects typer gives.
- ``fast_kernel_loading``: a kernel found in Numba's cache is loaded with only the
  runtime (NRT) initialised, without the registries: its machine code is complete
  and needs none of them. A kernel that is not in the cache is compiled exactly as
  before (Numba's compiler refreshes the context itself), after a one-line notice on
  stderr (``compile_notice``). Two more imports are left out on the way: NumPy's
  ``numpy.ma`` (~22 ms), which Numba's typing of an argument array imports to ask
  whether it is a masked array (``_type_arrays_without_numpy_ma``), and Numba's
  ``numba.np.arrayobj`` (~20 ms), imported only to give the cached ``np.empty`` and
  ``np.zeros`` code an environment whose globals it never reads
  (``_environments_without_imports``).

``OLCLI_NUMBA_REFRESH=1`` turns the fast loading off (to compare; the tests check both
give the same bytes). The fast loading serves Numba's JIT only (an install built without
a C compiler, or ``OLCLI_KERNELS=jit``): the kernels compiled ahead of time need none of
it. On a 2,000-line a9a train with Numba's cache warm it is 0.36 s against 0.58 s.

Only the olcli command does this (``cli.main`` as the console script or
``python -m olcli``); a program that imports olcli gets Numba's ordinary behaviour.
"""

import gc
import os
import re
import sys
import threading

_INTEGER = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")

_state = {"command": False, "fast_loading": False, "notice": None}


def is_command() -> bool:
    """Whether this process is the olcli command (``invoke`` was told so)."""
    return _state["command"]


# --- the cyclic garbage collector while a command loads ---

def defer_collection() -> None:
    """No cyclic garbage collection until ``resume_collection``: called as the olcli command's process
    starts a train, test or VW line (olcli/fastpath.py), whose imports (NumPy's, the engine's) create
    some hundred thousand objects and no garbage worth collecting. The collector's passes over them
    are ~4 ms of a run's start-up (48 collections, most of them NumPy's import). A program that
    imports olcli keeps its collector as it is."""
    if gc.isenabled():
        gc.disable()
        _state["collection_deferred"] = True


def resume_collection() -> None:
    """The collector as it was before ``defer_collection`` (nothing when it was not deferred): called
    when the command has loaded what it runs, before the data (``prepare_kernels``), and whenever the
    fast path hands a line to typer. The objects made meanwhile (modules, functions, the settings'
    tables: they live as long as the process) are moved to the collector's permanent generation first
    (``gc.freeze``), so that its next passes do not walk them all once more."""
    if _state.pop("collection_deferred", False):
        gc.freeze()
        gc.enable()


# --- options without pydantic ---

def _plain_value(annotation, value):
    """``value`` coerced to ``annotation`` when it is a plain spelling, else _DEFER."""
    if annotation is str:
        if type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a surrogate-escaped name: typer decides
                return _DEFER
            return value
        return _DEFER
    if annotation is bool:
        return value if type(value) is bool else _DEFER
    if annotation is int:
        if type(value) is int:
            return value
        if type(value) is str and _INTEGER.fullmatch(value):
            return int(value)
        return _DEFER
    if annotation is float:
        if type(value) is float:
            return value
        if type(value) is str and _DECIMAL.fullmatch(value):
            return float(value)
        return _DEFER
    if isinstance(annotation, type) and issubclass(annotation, str) and hasattr(annotation, "__members__"):
        if isinstance(value, annotation):
            return value
        if type(value) is str:
            for member in annotation.__members__.values():
                if member.value == value:
                    return member
        return _DEFER
    return _DEFER


_DEFER = object()


def _refuse_value(annotation, value, result, low, high, param) -> None:
    """A number's or a choice's bad value, in olcli's words (a usage error, exit 2)."""
    from olcli.errors import UsageError

    name = max(param.opts, key=len)
    if isinstance(annotation, type) and hasattr(annotation, "__members__") and isinstance(value, str):
        choices = ", ".join(member.value for member in annotation.__members__.values())
        raise UsageError(f"{name} takes one of {choices}; not {value!r}")
    if annotation not in (int, float) or not isinstance(value, str):
        return
    if result is _DEFER:
        if annotation is float:
            try:
                float(value)  # nan, inf, 1_000: typer's coercion and olcli's own checks decide
                return
            except ValueError:
                pass
        kind = "a whole number" if annotation is int else "a number"
        raise UsageError(f"{name} takes {kind}, not {value!r}")
    if low is not None and result < low:
        raise UsageError(f"{name} must be at least {low}, not {value}")
    if high is not None and result > high:
        raise UsageError(f"{name} must be at most {high}, not {value}")


def _light_coercion(group) -> None:
    """Give every option of every command a coercion that checks the plain spellings
    here and hands anything else to typer's own (built on first need). Does nothing
    with a typer that has no such coercion layer (those never imported pydantic)."""
    try:
        from typing import get_args, get_origin

        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:
        return

    class Light(RuntimeParam):
        __slots__ = ()

        def _coerce_value(self, value, param, ctx):
            descriptor = param.type_descriptor
            annotation = descriptor.annotation
            if get_origin(annotation) is list and isinstance(value, (list, tuple)):
                (item,) = get_args(annotation) or (None,)
                items = [_plain_value(item, one) for one in value]
                if all(one is not _DEFER for one in items):
                    return items
            else:
                result = _plain_value(annotation, value)
                info = descriptor.parameter_info
                low, high = getattr(info, "min", None), getattr(info, "max", None)
                if result is not _DEFER and (low is None or result >= low) and (high is None or result <= high):
                    return result  # out of a range: typer says so (or clamps)
                _refuse_value(annotation, value, result, low, high, param)
            full = build_runtime_param(descriptor)
            param._runtime_param = full
            return full._coerce_value(value, param=param, ctx=ctx)

    def lighten(param) -> None:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", 0) is not None:
            return
        info = descriptor.parameter_info
        ranged = getattr(info, "min", None) is not None or getattr(info, "max", None) is not None
        if (descriptor.file_annotation is not None or getattr(info, "parser", None) is not None
                or not getattr(info, "case_sensitive", True)
                or (ranged and (descriptor.annotation not in (int, float) or getattr(info, "clamp", False)))):
            return
        annotation = descriptor.annotation
        item = get_args(annotation)[0] if get_origin(annotation) is list and get_args(annotation) else annotation
        if item in (str, int, float, bool) or (isinstance(item, type) and hasattr(item, "__members__")):
            try:
                param._runtime_param = Light(parameter_info=info, annotation=annotation)
            except TypeError:
                pass

    def lighten_help(command) -> None:
        """The --help option is made when a command is parsed, and cached."""
        original = command.get_help_option

        def get_help_option(ctx):
            option = original(ctx)
            if option is not None:
                lighten(option)
            return option

        command.get_help_option = get_help_option

    for command in [group] + list(getattr(group, "commands", {}).values()):
        for param in command.params:
            lighten(param)
        if hasattr(command, "get_help_option"):
            lighten_help(command)


def command_of(args: list) -> str | None:
    """The subcommand named on the command line (the first argument that is not an option)."""
    for arg in args:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


# The commands whose code looks up another command of the group (by name).
LOOKS_UP = {"vw": ("train",)}


def _only_command(app, args: list):
    """A copy of the typer ``app`` holding only the command ``args`` names, when that is one
    of the app's own commands (the root's options and callback kept): building the click
    command of every command (seven, ~300 options) costs ~5 ms of a run that uses one, and
    what a command parses, answers and prints depends only on that command and the root.
    Otherwise (no command named, an unknown word that gets typer's suggestions, a sub-group,
    shell completion) ``app`` itself. ``olcli vw`` reads ``train``'s options (cli.vw): both
    are kept (``LOOKS_UP``)."""
    name = command_of(args)
    if name is None or app.registered_groups or "_OLCLI_COMPLETE" in os.environ:
        return app
    from typer.main import get_command_name

    wanted = (name, *LOOKS_UP.get(name, ()))
    chosen = [info for info in app.registered_commands
              if (info.name or get_command_name(info.callback.__name__)) in wanted]
    if len(chosen) != len(wanted):
        return app
    import copy

    narrowed = copy.copy(app)
    narrowed.registered_commands = chosen
    return narrowed


def invoke(app, args: list, command_process: bool = False) -> None:
    """Run the typer ``app`` on ``args`` as ``app(args=args, prog_name="olcli")`` does,
    with the option checks above; ``command_process``: this is the olcli command's
    own process (``is_command``)."""
    import typer.main

    _state["command"] = bool(command_process)
    group = typer.main.get_command(_only_command(app, args))
    from olcli.helptext import plain_metavars

    plain_metavars(group)  # INT, PATH, [a|b] in --help instead of <int>, <str>
    _light_coercion(group)
    group(args=args, prog_name="olcli")


# --- kernels ---

def fast_kernel_loading() -> None:
    """Load cached kernels without refreshing Numba's target context first (see the
    module's docstring). Any failure falls back to Numba's own path.
    OLCLI_NUMBA_REFRESH=1 keeps Numba's own path throughout (to compare, or if a
    Numba version ever needed its registries to load a kernel)."""
    if _state["fast_loading"] or os.environ.get("OLCLI_NUMBA_REFRESH") == "1":
        return
    _state["fast_loading"] = True
    try:
        from numba.core import caching
        from numba.core.runtime import rtsys
    except ImportError:
        return
    original = caching.Cache.load_overload

    def load_overload(self, sig, target_context):
        loaded = None
        try:
            rtsys.initialize(target_context)
            loaded = self._load_overload(sig, target_context)
        except Exception:  # anything unexpected: Numba's own path decides
            loaded = None
        if loaded is None:
            return original(self, sig, target_context)
        return loaded

    load_overload.__wrapped__ = original
    caching.Cache.load_overload = load_overload
    _type_arrays_without_numpy_ma()
    _environments_without_imports()
    _state["fast_loading"] = "installed"


def _environments_without_imports() -> None:
    """A cached kernel carries the Numba "environment" of every function compiled into
    it, and loading it rebuilds each one by importing the function's module for its
    globals. Among them are Numba's own implementations of ``np.empty`` and
    ``np.zeros``, whose module (``numba.np.arrayobj``, with Numba's string and unicode
    support) takes ~20 ms to import. Compiled nopython code never reads an
    environment's globals (only its constants; the globals serve object mode, which no
    olcli kernel uses), so a module not imported yet is not imported for this: its
    environment gets a dict holding only the module's name, which is what Numba needs
    to save the environment again. An environment of a module already imported (olcli's
    own kernels) gets that module's globals, as in Numba's own ``_rebuild_env``."""
    from numba.core import environment

    numba_rebuild_env = environment._rebuild_env
    if getattr(numba_rebuild_env, "__wrapped__", None) is not None:
        return

    def rebuild_env(modname, consts, env_name):
        if modname in sys.modules or environment.lookup_environment(env_name) is not None:
            return numba_rebuild_env(modname, consts, env_name)
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    rebuild_env.__wrapped__ = numba_rebuild_env
    environment._rebuild_env = rebuild_env


def _type_arrays_without_numpy_ma() -> None:
    """Numba types a kernel's arguments in Python on its first call (to find the
    overload in the cache) and a record's fields on every call, and its typing of an
    array begins by asking whether it is a ``numpy.ma.MaskedArray``: the first such
    question imports ``numpy.ma`` (~22 ms, a fifth of a small run's time above the Numba
    floor). An object whose type is exactly ``np.ndarray`` is not a masked array, so
    it is typed here as Numba's own ``_typeof_ndarray`` types it, without asking;
    anything else (a subclass such as a masked array) goes to Numba's function."""
    import numpy as np
    from numba.core import errors, types
    from numba.core.typing.typeof import typeof_impl
    from numba.np import numpy_support

    numba_typeof_ndarray = typeof_impl.dispatch(np.ndarray)

    def typeof_ndarray(val, c):
        if type(val) is not np.ndarray:
            return numba_typeof_ndarray(val, c)
        try:
            dtype = numpy_support.from_dtype(val.dtype)
        except errors.NumbaNotImplementedError:
            return numba_typeof_ndarray(val, c)  # its message for an unsupported dtype
        return types.Array(dtype, val.ndim, numpy_support.map_layout(val), readonly=not val.flags.writeable)

    typeof_ndarray.__wrapped__ = numba_typeof_ndarray
    typeof_impl.register(np.ndarray)(typeof_ndarray)


_notice_lock = threading.Lock()


def compile_notice(stream=None, enabled=None) -> None:
    """Print one line on stderr when a kernel is about to be compiled (a cold cache),
    once per process, terminal or not (unless ``enabled`` is False)."""
    with _notice_lock:
        if _state["notice"] is not None:
            return
        stream = stream or sys.stderr
        if enabled is False:
            _state["notice"] = False
            return
        from numba.core import event

        class Notice(event.Listener):
            printed = False

            def on_start(self, ev):
                with _notice_lock:
                    if Notice.printed:
                        return
                    Notice.printed = True
                try:
                    stream.write("olcli: compiling kernels (once; later runs load them from Numba's cache; "
                                 "`olcli warm` compiles them all ahead)\n")
                    stream.flush()
                except (OSError, ValueError):
                    pass

            def on_end(self, ev):
                pass

        listener = Notice()
        event.register("numba:compile", listener)
        _state["notice"] = listener


def _ahead_of_time() -> bool:
    """Whether this process runs the kernels compiled ahead of time (engine/jit.py's MODE):
    then none of the Numba measures here applies."""
    from olcli.engine import jit

    return jit.MODE == "aot"


def prepare_kernels(quiet: bool) -> None:
    """Called by a command before its first kernel, in the olcli command's process
    only: the fast loading and, unless quiet, the compile notice; the garbage
    collector resumes (``resume_collection``)."""
    resume_collection()
    if not _state["command"] or _ahead_of_time():
        return
    fast_kernel_loading()
    if not quiet:
        compile_notice()
