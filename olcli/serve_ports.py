"""What ``olcli serve`` holds outside its model: the listening sockets, the port and pid files
(``--port-file``, ``--http-port-file``, ``--pid-file``), and the folder where the workers of
``--workers N`` find their shared table (olcli/shared_table.py).

The supervisor of ``--workers N`` (olcli/serve_workers.py) needs these and nothing else, so
this module imports only the standard library and olcli's light modules (no NumPy, no model
code): the supervisor stays a small process."""

import os
import shutil
import socket
import stat
import tempfile

from olcli.atomic import atomic_write
from olcli.errors import OlcliError, UsageError
from olcli.serve_log import EventLog
from olcli.serve_options import ServeOptions


# --- sockets ---

def bind_socket(host: str, port: int, reuse_port: bool, listen: bool = True, backlog: int = 1024) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OlcliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def listening_sockets(options: ServeOptions, reuse_port: bool, listen: bool) -> dict:
    sockets = {"line": bind_socket(options.host, options.port, reuse_port, listen, options.max_connections)}
    if options.http_port is not None:
        try:
            sockets["http"] = bind_socket(options.host, options.http_port, reuse_port, listen,
                                          options.max_connections)
        except OlcliError:
            sockets["line"].close()
            raise
    return sockets


# --- port and pid files ---

_WRITTEN: dict = {}   # path -> the bytes this process wrote there (--port-file, --pid-file, --http-port-file)


def write_small_file(path: str | None, text: str, role: str) -> None:
    """Write a port or pid file: a regular file atomically, a device, FIFO or socket in place
    (olcli/atomic.py); a failure (``/dev/full``: ENOSPC) is an error naming the option."""
    if path:
        data = text.encode()
        atomic_write(path, data, role=role)
        _WRITTEN[path] = data


def remove_written(path: str | None) -> None:
    """Remove, on stop, a port or pid file this process wrote: only a regular file that still
    holds what it wrote (never a device, FIFO or socket it was given, nor a file another
    process has written since)."""
    data = _WRITTEN.pop(path, None) if path else None
    if data is None:
        return
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return
        with open(path, "rb") as f:
            if f.read(len(data) + 1) != data:
                return
        os.unlink(path)
    except OSError:
        pass


def announce(options: ServeOptions, log: EventLog, sockets: dict, pid: int) -> None:
    ports = {name: sock.getsockname()[1] for name, sock in sockets.items()}
    write_small_file(options.port_file, f"{ports['line']}\n", "--port-file")
    if "http" in ports:
        write_small_file(options.http_port_file, f"{ports['http']}\n", "--http-port-file")
    write_small_file(options.pid_file, f"{pid}\n", "--pid-file")
    log("listening", host=options.host, port=ports["line"],
        **({"http_port": ports["http"]} if "http" in ports else {}),
        model=options.model_path, workers=options.workers, learn=options.learn)


# --- the shared tables' folder ---

def table_folder(group: int) -> str:
    """Where the workers of supervisor ``group`` (its pid) publish their shared tables."""
    return os.path.join(tempfile.gettempdir(), f"olcli-tables-{os.getuid()}-{group}")


def remove_table_folder(group: int) -> None:
    """The supervisor's clean-up at stop (the memory files go with their last user)."""
    shutil.rmtree(table_folder(group), ignore_errors=True)
