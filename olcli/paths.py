"""Which file is this? Inputs and outputs checked before any work, and OS errors as messages.

- Every input is checked for what it is (missing, a dangling symbolic link, a
  directory, unreadable, a path through a directory olcli may not enter), with
  a message that says which.
- Every output is classified: standard output (``-``, ``/dev/stdout``), a
  stream written in place (a character device such as ``/dev/null`` or a
  terminal, a FIFO, a socket, ``/dev/fd/N``), or a regular file (new or
  existing), which olcli replaces atomically at the end of a symbolic link.
- No output may be the same file as an input or another output: same path,
  symbolic link or hard link, compared by device and inode (standard input and
  output included). Character devices and sockets are exempt (a terminal is
  both stdin and stdout; ``/dev/null`` can take any number of outputs), and so is
  standard output shared by ``-p -`` and ``--audit`` (one stream, written in
  order).
"""

import errno
import os
import re
import stat

from olcli.errors import DataError, ModelError, OlcliError, UsageError
from olcli.records import Record

# Standard streams found closed when the process started: cli.main points them at
# /dev/null (so that no file olcli opens takes descriptor 0, 1 or 2, where a stray
# print would land in a model), and the commands refuse to read or write them.
CLOSED_STREAMS: set = set()

_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def fd_alias(path: str) -> int | None:
    """The file descriptor a path names in this process (/dev/stdout, /dev/fd/3,
    /proc/self/fd/3), or None. Such paths are used through the descriptor, never
    reopened: reopening a socket fails, and reopening a redirected file would
    truncate it or start at its beginning."""
    if path in _STANDARD:
        return _STANDARD[path]
    match = _FD_PATH.match(path)
    return int(match.group(1)) if match else None


def error_name(exc: OSError) -> str:
    """'No space left on device (ENOSPC)'."""
    code = errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or str(exc)
    return f"{text} ({code})" if code else text


def reopen_closed_standard_streams() -> None:
    """Descriptors 0, 1 and 2 that are closed (``<&-``, ``>&-``, ``2>&-``) get
    /dev/null, and Python's sys.stdin/stdout/stderr (None then) a stream on it."""
    import io
    import sys

    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            got = os.open(os.devnull, os.O_RDWR)
        except OSError:
            continue
        if got != fd:  # a lower descriptor was closed too and took it; put it where it belongs
            os.dup2(got, fd)
            os.close(got)
        CLOSED_STREAMS.add(name)
    if sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "rb", closefd=False))
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), write_through=True)
    if sys.stderr is None:
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), errors="backslashreplace",
                                      write_through=True)


class QuietWhenGone:
    """stderr that never fails: once a write fails (a closed pipe, EIO), the rest is
    dropped, so a lost terminal or a ``2>&1 | head`` never costs the model."""

    def __init__(self, stream):
        self._stream = stream
        self.gone = False

    def write(self, text):
        if not self.gone:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self.gone = True
        return len(text)

    def flush(self):
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def __getattr__(self, name):
        return getattr(self._stream, name)


# --- inputs ---

def missing(path: str, what: str) -> str:
    """Why a path that cannot be stat'ed is not there, as precisely as possible."""
    if os.path.islink(path):
        return f"{what} {path} is a symbolic link to {os.readlink(path)}, which does not exist"
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        if os.path.lexists(directory) and not os.path.isdir(directory):
            return f"{what} {path} does not exist ({directory} is not a directory)"
        return f"{what} {path} does not exist (no directory {directory})"
    return f"{what} {path} does not exist"


def check_input(path: str, what: str = "input file", error=DataError) -> os.stat_result | None:
    """Refuse an input that cannot be read, saying why; returns its stat (None for '-')."""
    if path == "-":
        return _stat_fd(0, "standard input", error)
    fd = fd_alias(path)
    if fd is not None:
        return _stat_fd(fd, path, error)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise error(missing(path, what)) from None
    except PermissionError:
        raise error(f"cannot open {what} {path}: permission denied on a directory in its path") from None
    except OSError as exc:
        raise error(f"cannot open {what} {path}: {error_name(exc)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{what} {path} is a directory, not a {'model' if error is ModelError else 'data'} file")
    if stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode) or stat.S_ISCHR(info.st_mode):
        # Opening a FIFO here would block, or wake a writer that then loses its reader.
        if not os.access(path, os.R_OK):
            raise error(f"{what} {path} exists but is not readable: permission denied")
        return info
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except PermissionError:
        raise error(f"{what} {path} exists but is not readable: permission denied "
                    f"(check its permissions)") from None
    except OSError as exc:
        raise error(f"{what} {path} exists but cannot be opened: {error_name(exc)}") from None
    return info


def _stat_fd(fd: int, name: str, error) -> os.stat_result:
    try:
        return os.fstat(fd)
    except OSError:
        raise error(f"{name} is closed: there is nothing to read") from None


# --- outputs ---

class Output(Record):
    """Where one output goes. ``kind``: 'stdout' (the process's standard output,
    written through sys.stdout), 'fd' (another descriptor of this process),
    'stream' (a character device, FIFO or socket, opened and written in place)
    or 'file' (a regular file, new or existing; ``target`` is where it really is,
    symbolic links followed); ``info``: the stat of the existing file or stream."""
    _fields = ("role", "path", "kind", "target", "info")

    def __init__(self, role: str, path: str, kind: str, target: str, info: os.stat_result | None = None):
        self.role, self.path, self.kind, self.target, self.info = role, path, kind, target, info


def _stream_kind(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def check_output(path: str, role: str) -> Output:
    """Classify an output and refuse it before any work when it cannot be written.
    Exit code 2: nothing was read yet."""
    if path == "-":
        return Output(role, path, "stdout", path, _fstat(1))
    fd = fd_alias(path)
    if fd is not None:
        info = _fstat(fd)
        if info is None:
            raise UsageError(f"cannot write {role} {path}: descriptor {fd} is not open")
        return Output(role, path, "stdout" if fd == 1 else "fd", path, info)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"cannot write {role} {path}: {error_name(exc)}") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{role} {path} is a directory; give a file name")
    if info is not None and stat.S_ISBLK(info.st_mode):
        raise UsageError(f"{role} {path} is a block device; give a file name")
    if info is not None and _stream_kind(info.st_mode):
        if not os.access(path, os.W_OK):
            raise UsageError(f"cannot write {role} {path}: permission denied")
        return Output(role, path, "stream", path, info)
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    if not os.path.isdir(directory):
        shown = os.path.dirname(os.path.abspath(path))
        raise UsageError(f"cannot write {role} {path}: directory {shown} does not exist")
    _probe_directory(directory, role, path)
    if info is not None and not os.access(target, os.W_OK):
        raise UsageError(f"cannot write {role} {path}: the file is read-only "
                         f"(permission denied, or immutable; remove it or change its permissions)")
    return Output(role, path, "file", target, info)


def _probe_directory(directory: str, role: str, path: str) -> None:
    """Create and remove a file where the output will be written: the honest test
    of a read-only file system, a full inode table, an immutable directory or a
    directory olcli may not write."""
    import tempfile   # here: with shutil and random, ~2-6 ms of a start that writes nothing

    try:
        fd, probe = tempfile.mkstemp(prefix=".olcli-probe-", dir=directory)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            reason = f"directory {directory} is not writable ({error_name(exc)})"
        elif exc.errno == errno.EROFS:
            reason = f"{directory} is on a read-only file system"
        else:
            reason = error_name(exc)
        raise UsageError(f"cannot write {role} {path}: {reason}") from None
    os.close(fd)
    os.unlink(probe)


def _fstat(fd: int):
    try:
        return os.fstat(fd)
    except OSError:
        return None


def _identity(info: os.stat_result | None, path: str) -> tuple:
    if info is not None:
        return ("inode", info.st_dev, info.st_ino)
    return ("path", os.path.realpath(path))


def _shareable(info: os.stat_result | None) -> bool:
    """A terminal, /dev/null or a socket may be several roles at once."""
    return info is not None and (stat.S_ISCHR(info.st_mode) or stat.S_ISSOCK(info.st_mode))


def check_distinct(inputs: list, outputs: list, allowed: tuple = ()) -> None:
    """Refuse (exit 2) any output that is the same file as an input or as another
    output. ``inputs``: (role, path, stat or None); ``outputs``: Output objects;
    ``allowed``: pairs of roles that may be one file (``-i m -f m``: the model is
    read whole before it is replaced atomically)."""
    seen = []
    for role, path, info in inputs:
        if path == "-" and info is None:
            continue
        seen.append((role, path, info, _identity(info, path), "input"))
    for output in outputs:
        info = output.info
        key = _identity(info, output.target)
        for role, path, other_info, other_key, side in seen:
            if key != other_key or _shareable(info):
                continue
            if {role, output.role} in [set(pair) for pair in allowed]:
                continue
            if side == "output" and output.kind == "stdout" and path_kind(path) == "stdout":
                continue  # -p - and --audit share standard output, in order
            shown = "(standard input)" if path == "-" else path
            if output.path == path:
                same = f"{output.role} {output.path} is also the {role}"
            else:
                same = f"{output.role} {output.path} is the same file as the {role} {shown} (a link, or the same stream)"
            destroy = "destroy" if side == "input" else "overwrite"
            raise UsageError(f"{same}: writing the {output.role} would {destroy} the {role}; choose another path")
        seen.append((output.role, output.path, info, key, "output"))


def path_kind(path: str) -> str:
    return "stdout" if path == "-" or fd_alias(path) == 1 else "other"


def open_in_place(output: Output):
    """A binary file object writing a stream output where it is (no truncation,
    no temporary file): a duplicate of the descriptor for -/fd outputs."""
    if output.kind in ("stdout", "fd"):
        fd = 1 if output.kind == "stdout" else fd_alias(output.path)
        return os.fdopen(os.dup(fd), "wb")
    if output.info is not None and stat.S_ISSOCK(output.info.st_mode):
        import socket

        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(output.path)
        return connection.makefile("wb")
    return os.fdopen(os.open(output.path, os.O_WRONLY), "wb")


def write_all(stream, data) -> None:
    """Write every byte: a buffered writer may write only part of a large buffer (a
    pipe whose reader left, a disk that filled up) and say so only in its return
    value; the next write then raises the error (EPIPE, ENOSPC) instead of the data
    being silently cut short."""
    view = memoryview(data).cast("B")
    while view.nbytes:
        written = stream.write(view)
        if written is None:  # a non-blocking stream that could not take anything now
            written = 0
        view = view[written:]


class OutputError(OlcliError, OSError):
    """An output could not be written (ENOSPC, EIO, EROFS, EACCES, EPERM, ...).
    Also an OSError, so that library callers of ``Learner.save`` can catch it as one."""


class PipeClosed(OlcliError):
    """The reader of standard output (or of an output pipe) went away, e.g. ``| head``:
    stop as SIGPIPE would (exit 141), without an error message."""

    exit_code = 141
    quiet = True


def write_failed(role: str, path: str, exc: OSError, unchanged: bool = False) -> OutputError:
    tail = f"; {path} is unchanged" if unchanged else ""
    return OutputError(f"cannot write {role} {path}: {error_name(exc)}{tail}")
