"""The olcli command: ``main`` runs it, with errors translated into ``Error: ...`` on
stderr and an exit code in one place.

A plain ``olcli train`` or ``olcli test`` line is read by olcli/fastpath.py from the
table of settings, without importing typer, click or rich; everything else (--help,
an error in the options, the other commands, shell completion) goes to the typer app
(olcli/cli_app.py, also ``olcli.cli.app``). Numba is imported only inside the
commands, so that ``olcli --help`` and ``olcli --version`` stay instant.
"""

import os
import signal
import sys

from olcli import signals


def _running_as_command() -> bool:
    """Whether this process is the olcli command (the console script or
    ``python -m olcli``), not a program that imports olcli.cli."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec is not None and spec.name == "olcli.__main__") or os.path.basename(sys.argv[0] or "") == "olcli"


if _running_as_command():
    # First thing, before any other import: a signal from now on is recorded and
    # handled by the command (never a KeyboardInterrupt traceback).
    signals.install()
    # NumPy's OpenBLAS starts a thread per core at import, which the command never uses
    # (no BLAS call: the kernels are Numba's): one thread only, unless the user said
    # otherwise. Its threads cost ~0.05 s of CPU at every start (numpy imports in
    # 0.06-0.07 s of CPU instead of 0.11-0.13) and showed in the samples of the parse
    # workers' runs (blas_thread_server, 1-2%).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from typing import List, Optional  # noqa: E402

from olcli import paths  # noqa: E402

if _running_as_command():
    # Closed standard streams get /dev/null, so that no file olcli opens takes their place.
    paths.reopen_closed_standard_streams()

from olcli.errors import OlcliError  # noqa: E402
from olcli.settings import BY_NAME, RUN_SETTINGS  # noqa: E402


def __getattr__(name):
    """The typer app and its commands (``app``, ``_known_options``, ...): olcli/cli_app.py."""
    if name.startswith("__"):
        raise AttributeError(name)
    from olcli import cli_app

    try:
        return getattr(cli_app, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def main(argv: Optional[List[str]] = None) -> None:
    """The olcli command: errors -> ``Error: ...`` on stderr and an exit code, in one
    place. 0 ok; 1 data, model or runtime error; 2 usage error; 128 + signal for
    SIGHUP/SIGINT/SIGTERM (129/130/143); 141 when the reader of stdout went away
    (quietly)."""
    standalone = argv is None and _running_as_command()
    installed_here = signals.install()
    if installed_here:
        signals.reset()
    if standalone:
        sys.stderr = paths.QuietWhenGone(sys.stderr)
        try:
            sys.stdout.reconfigure(errors="surrogateescape")  # names from undecodable arguments, as given
        except (AttributeError, ValueError):
            pass
    args = list(sys.argv[1:] if argv is None else argv)
    if "--traceback" in args:  # accepted anywhere on the line, handled by the root command
        args.remove("--traceback")
        args.insert(0, "--traceback")
    code = 0
    try:
        code = _run_app(args)
    finally:
        if installed_here:
            signals.uninstall()
    code = _flush_stdout(code)
    if standalone:
        # Everything is written and flushed: leave now. Not waiting for threads (a
        # reader blocked on a pipe, a parse worker in a kernel), and not through the
        # interpreter's finalization, which puts the default signal handlers back: a
        # late SIGTERM would then kill a run that has already succeeded.
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def _run_app(args: list) -> int:
    """Run the command; returns the exit code, having printed what went wrong."""
    show_traceback = "--traceback" in args
    try:
        try:
            from olcli import fastpath  # a plain train or test line, without typer

            if not fastpath.run(args, command_process=_running_as_command()):
                from olcli import startup  # the options checked without pydantic
                from olcli.cli_app import app

                startup.invoke(app, args, command_process=_running_as_command())
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click met a closed stdout pipe
                code = 128 + signal.SIGPIPE
    except signals.RunStopped as exc:
        _error(exc, show_traceback)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # SIGINT in a process where olcli's handler is not installed
        _error(signals.RunStopped(signal.SIGINT), show_traceback, exc)
        return 128 + signal.SIGINT
    except OlcliError as exc:
        if not getattr(exc, "quiet", False):
            _error(exc, show_traceback)
        return exc.exit_code
    except BrokenPipeError:
        # The reader of our stdout went away (e.g. `olcli inspect m | head`).
        return 128 + signal.SIGPIPE
    pending = signals.pending()
    if pending is not None:  # a signal no command acted on (during --help, a refused option, ...)
        signals.commit()
        _error(signals.RunStopped(pending), show_traceback)
        return 128 + pending
    return code


def _error(exc: BaseException, show_traceback: bool, cause: BaseException | None = None) -> None:
    if show_traceback:
        import traceback

        traceback.print_exception(cause or exc, file=sys.stderr)
    try:
        sys.stderr.write(f"Error: {_worded(exc)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _worded(exc: BaseException) -> str:
    """The message as the command line says it: an error worded from its fields names the
    option's flag (``--passes must be at least 1``) where the library names the keyword."""
    if getattr(exc, "from_fields", False):
        row = BY_NAME.get(exc.option) or next((r for r in RUN_SETTINGS if r.name == exc.option), None)
        if row is not None and row.flags:
            return f"{row.flags[0]} {exc.reason}"
    return str(exc)


def _flush_stdout(code: int) -> int:
    """The last of stdout: a reader that went away ends the run quietly (141), a full
    disk or an I/O error is an error like any other (1)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_closed_stdout()
        return code or 128 + signal.SIGPIPE
    except OSError as exc:
        _silence_closed_stdout()
        if code == 0:
            _error(OlcliError(f"cannot write standard output: {paths.error_name(exc)}"), False)
            return 1
    except ValueError:
        pass
    return code


def _silence_closed_stdout() -> None:
    """After the reader of stdout went away, the interpreter's final flush would
    raise again (and print "Exception ignored"); point stdout at /dev/null so that
    exit is quiet."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
