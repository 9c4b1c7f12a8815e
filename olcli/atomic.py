"""Atomic file replacement: write a temporary file beside the target, fsync, rename.

A crash or a kill at any moment leaves either the old file or the new one, never
a half-written file in its place. Only regular files (new or existing) are
replaced: a symbolic link is followed and its target replaced (the link stays),
and a character device, FIFO, socket or ``/dev/stdout`` is written in place
(``-f /dev/null`` must not turn /dev/null into a regular file). Signals are held
off while the file is renamed into place and while a temporary file is removed
(olcli/signals.py), so neither is ever left half-done.

OS errors (a full disk, a read-only file system, an I/O error, ``ulimit -f``)
become ``paths.OutputError`` naming the file and the reason; the file being
replaced is then unchanged and no temporary file is left.
"""

import os
import stat

from olcli import signals
from olcli.paths import Output, OutputError, error_name, fd_alias, open_in_place, write_all


def atomic_write(path: str, data, role: str = "file") -> None:
    """Replace ``path`` with ``data`` (atomically for regular files): bytes, or an iterable
    of bytes-like parts that can be iterated more than once (``model.Encoded``), written in
    turn, so that a large file is never held whole in memory."""
    if path == "-" or fd_alias(path) is not None:
        _write_in_place(Output(role, path, "stdout" if path == "-" or fd_alias(path) == 1 else "fd", path), data)
        return
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
        _write_in_place(Output(role, path, "stream", path, info), data)
        return
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    temporary, in_place = None, False
    import tempfile   # here: with shutil and random, ~2-6 ms of every start, for a run that writes a file

    try:
        with signals.critical():  # the temporary file exists only with a name to remove it by
            fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "wb") as out:
            _write_parts(out, data)
            out.flush()
            os.fsync(out.fileno())
        in_place = _special(target)   # it became a device, FIFO or socket since: never renamed over
        if not in_place:
            with signals.critical():
                os.replace(temporary, target)
                temporary = None
    except OSError as exc:
        raise OutputError(f"cannot write {role} {path}: {error_name(exc)}"
                          + (f"; {path} is unchanged" if info is not None else "")) from exc
    finally:
        if temporary is not None:
            with signals.critical():
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
    if in_place:
        _write_in_place(Output(role, path, "stream", target, os.stat(target)), data)
        return
    _fsync_directory(directory)


def _write_parts(out, data) -> None:
    for part in (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data:
        write_all(out, part)


def _special(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _write_in_place(output: Output, data: bytes) -> None:
    try:
        with open_in_place(output) as out:
            _write_parts(out, data)
            out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {output.role} {output.path}: {error_name(exc)}") from exc


def _mode_for(path: str) -> int:
    """Keep the mode of the file being replaced; a new file gets 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_directory(directory: str) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
