"""VW's daemon line protocol (``LineServer``, one ``LineConnection`` per client): each VW or
libsvm line gets one reply line, ``prediction[ tag]`` (the text ``olcli test -p`` writes) or
``error: <message>`` for a bad line, in order; empty lines get no reply, as in VW's daemon. All
the complete lines one read from the socket delivers (pipelined lines) go through one parse and
one kernel call (``Served.reply_lines``, olcli/served.py); a read of a few whole lines takes the
one-call path.

The connections run on the serving process's asyncio event loop, one writer with HTTP, the signals
and the saves, but not through asyncio's socket transports: ``LineServer`` accepts on the listening
socket and ``SocketTransport`` reads and writes each connection's non-blocking socket from the loop's
reader and writer callbacks (``loop.add_reader``), with the part of the transport API
``LineConnection`` uses, reading at most 64 KiB at a time. A fixed-reply server answering one JSON
line per request (benchmarks/cb_serve.py's floors, this 2-core VM) costs ~85-95 µs of CPU per
request through asyncio's transport and protocol; through the loop's reader callback, ~80 µs when it
reads 256 KiB at a time as asyncio does (``recv`` then allocates 256 KiB for every read), ~40-45 µs
at 64 KiB; ~20-30 µs as one thread on blocking sockets."""

import asyncio
import collections
import errno
import socket
import time

import numpy as np

from olcli.serve_log import EventLog
from olcli.serve_options import ServeOptions
from olcli.served import FAST_PATH_BYTES, Served, error_line


class LineConnection(asyncio.Protocol):
    """One client of the line protocol. All complete lines of a read are answered at once;
    a line longer than ``--max-line-bytes`` is answered with an error (and dropped); replies a
    client does not read stop reading from it (the others go on)."""

    __slots__ = ("server", "served", "max_line_bytes", "transport", "buffer", "discarding", "fast_limit", "reads",
                 "seen_reads", "last_active", "errors", "peer", "accepted")

    def __init__(self, server: "LineServer"):
        self.server = server
        self.served = server.served
        self.max_line_bytes = server.options.max_line_bytes
        self.transport = None
        self.buffer = b""
        self.discarding = 0          # bytes of an over-long line dropped so far
        # The longest read data_received answers at once as whole lines on the one-call path:
        # min(--max-line-bytes, FAST_PATH_BYTES) while nothing is pending (no partial line kept,
        # no over-long line being dropped), else -1. One comparison per read says all of that.
        self.fast_limit = -1
        self.reads = 0               # reads so far; the idle sweep compares it with what it saw last
        self.seen_reads = 0
        self.last_active = time.monotonic()   # when the sweep first saw the latest read (or the connection was made)
        self.errors = 0
        self.peer = None
        self.accepted = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = _peer(transport)
        server = self.server
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay on replies
        if len(server.connections) >= server.options.max_connections or server.stopping:
            server.served.stats.connections_refused += 1
            server.log.client_error("connection_refused", peer=self.peer,
                                    error=f"too many connections (--max-connections {server.options.max_connections})"
                                    if not server.stopping else "shutting down")
            transport.write(error_line(f"too many connections (limit {server.options.max_connections}); try later"
                                       if not server.stopping else "server shutting down") + b"\n")
            transport.close()
            return
        self.accepted = True
        self._pending_changed()
        server.connections.add(self)
        server.served.stats.connections_total += 1
        transport.set_write_buffer_limits(high=server.write_buffer_limit)

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        if len(data) <= self.fast_limit and data[-1:] == b"\n":
            # The usual read (a single example, or a few): whole lines, none too long, nothing
            # pending, answered by one kernel call. As few Python steps as possible: each costs
            # the round trip a little (benchmarks/serve_vs_vw.py).
            served = self.served
            fast = served.fast
            if fast is not None:
                try:
                    reply = fast.reply(data)
                except Exception:  # a bug: _reply below says so (and logs it)
                    reply = None
                if reply is not None:
                    stats = served.stats
                    stats.requests += 1
                    stats.fast_path += 1
                    stats.examples += reply.count(b"\n")
                    self.transport.write(reply)
                    return
            self._reply(data)   # a bad line or a divergence: the batch path says what
            return
        if not self.accepted:
            return
        if data[-1:] == b"\n" and not self.buffer and not self.discarding and len(data) <= self.max_line_bytes:
            self._reply(data)   # whole lines, none of them too long, more than the one-call path takes
            return
        if self.discarding:
            newline = data.find(b"\n")
            if newline < 0:
                self.discarding += len(data)
                self._pending_changed()
                return
            self._too_long(self.discarding + newline)
            data = data[newline + 1:]
        if self.buffer:
            data = self.buffer + data
            self.buffer = b""
        end = data.rfind(b"\n") + 1
        if end < len(data):
            rest = data[end:]
            if len(rest) > self.server.options.max_line_bytes:
                self.discarding = len(rest)
            else:
                self.buffer = rest
            data = data[:end]
        self._pending_changed()
        if data:
            self._answer(data)

    def _pending_changed(self) -> None:
        """``fast_limit`` after ``buffer`` or ``discarding`` changed."""
        pending = self.buffer or self.discarding or not self.accepted
        self.fast_limit = -1 if pending else min(self.max_line_bytes, FAST_PATH_BYTES)

    def _answer(self, data: bytes) -> None:
        limit = self.server.options.max_line_bytes
        if len(data) > limit + 1:
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
            starts = np.concatenate(([0], ends[:-1] + 1))
            long = np.flatnonzero(ends - starts > limit)
            if long.size:
                position = 0
                for k in long.tolist():
                    if starts[k] > position:
                        self._reply(data[position:int(starts[k])])
                    self._too_long(int(ends[k] - starts[k]))
                    position = int(ends[k]) + 1
                if position < len(data):
                    self._reply(data[position:])
                return
        self._reply(data)

    def _reply(self, data: bytes) -> None:
        try:
            reply = self.served.reply_lines(data)
        except Exception as exc:  # a bug, not the client's mistake: say so for each line, keep serving
            server = self.server
            server.served.stats.internal_errors += 1
            server.log("internal_error", "error", peer=self.peer, error=f"{type(exc).__name__}: {exc}")
            count = sum(1 for line in data.split(b"\n") if line.strip(b" \t\r"))
            reply = (error_line(f"internal error ({type(exc).__name__}); see the server log") + b"\n") * count
        if reply:
            self.transport.write(reply)

    def _too_long(self, length: int) -> None:
        self.discarding = 0
        self._pending_changed()
        self.errors += 1
        limit = self.server.options.max_line_bytes
        self.server.served.stats.bad_lines += 1
        self.server.log.client_error("line_too_long", peer=self.peer, bytes=length, limit=limit)
        self.transport.write(error_line(f"line longer than {limit} bytes (--max-line-bytes); dropped") + b"\n")

    def eof_received(self):
        if self.accepted:
            if self.discarding:
                self._too_long(self.discarding)
            elif self.buffer:  # a last line without '\n'
                data, self.buffer = self.buffer, b""
                self._pending_changed()
                self._unterminated(data, "the client closed the connection")
        return False  # close once the replies are written

    def _unterminated(self, data: bytes, why: str) -> None:
        """A last line without its '\n'. A client that writes a last line and closes its side
        (``printf '1 |a b' | nc``) and a client killed in the middle of a line (its kernel sends
        the same FIN) cannot be told apart: the line may be a fragment ("11 " of "11 |a b c").
        It is predicted (never learned) when the server only predicts; with --learn it is
        answered with an error and not learned, so no fragment is ever learned."""
        if not self.served.options.learn:
            self._answer(data + b"\n")
            return
        self.server.served.stats.bad_lines += 1
        self.server.log.client_error("unterminated_line", peer=self.peer, bytes=len(data), why=why)
        self.transport.write(error_line(f"{why} in the middle of a line (no end of line after "
                                        f"{len(data)} bytes): not learned") + b"\n")

    def pause_writing(self) -> None:
        # The client does not read its replies: stop reading its lines until it does.
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        if self.accepted:
            self.server.connections.discard(self)


class SocketTransport:
    """What a ``LineConnection`` uses of an asyncio transport, on its non-blocking socket directly
    (see the module's docstring). As asyncio's socket transport: a reader callback receives (up to
    ``MAX_READ`` bytes a read) and calls ``data_received``; an empty read is the client's end
    (``eof_received``, then ``close``); ``write`` sends at once and keeps what the socket does not
    take, sent by a writer callback as the client reads; above the high-water mark the protocol's
    ``pause_writing`` is called, at a quarter of it ``resume_writing``; ``close`` stops reading and
    ends the connection once the kept bytes are sent, ``abort`` at once; ``connection_lost`` is
    called soon after (from the loop), then the socket closed. A reset connection is aborted."""

    MAX_READ = 64 * 1024   # recv allocates this much for every read: asyncio's 256 KiB costs ~35 µs a read more

    __slots__ = ("loop", "sock", "fd", "protocol", "peer", "buffer", "buffered", "high", "low", "reading",
                 "closing", "lost", "paused")

    def __init__(self, loop, sock: socket.socket, protocol, peer):
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.protocol = protocol
        self.peer = peer
        self.buffer = collections.deque()   # bytes not sent yet
        self.buffered = 0
        self.high, self.low = 64 * 1024, 16 * 1024
        self.reading = False
        self.closing = False
        self.lost = False
        self.paused = False                 # pause_writing called, resume_writing not yet

    def start(self) -> None:
        self.protocol.connection_made(self)
        if not self.closing:
            self.reading = True
            self.loop.add_reader(self.fd, self._read_ready)

    # -- reading --

    def _read_ready(self) -> None:
        if self.lost:
            return
        try:
            data = self.sock.recv(self.MAX_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:   # reset by the client
            self._force_close(exc)
            return
        try:
            if data:
                self.protocol.data_received(data)
                return
            self._stop_reading()
            if not self.protocol.eof_received():
                self.close()
        except Exception as exc:   # a bug in the protocol: as asyncio's transport, logged and the connection ended
            self.loop.call_exception_handler({"message": "olcli serve: a line connection's handler failed",
                                              "exception": exc, "transport": self, "protocol": self.protocol})
            self._force_close(exc)

    def _stop_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.loop.remove_reader(self.fd)

    def pause_reading(self) -> None:
        if not self.closing:
            self._stop_reading()

    def resume_reading(self) -> None:
        if not self.closing and not self.reading:
            self.reading = True
            self.loop.add_reader(self.fd, self._read_ready)

    # -- writing --

    def write(self, data: bytes) -> None:
        if self.lost or not data:
            return
        if not self.buffer:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._force_close(exc)
                return
            if sent == len(data):
                return
            data = data[sent:]
            self.loop.add_writer(self.fd, self._write_ready)
        self.buffer.append(data)
        self.buffered += len(data)
        if self.buffered > self.high and not self.paused:
            self.paused = True
            self.protocol.pause_writing()

    def _write_ready(self) -> None:
        buffer = self.buffer
        while buffer:
            data = buffer[0]
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._force_close(exc)
                return
            self.buffered -= sent
            if sent < len(data):
                buffer[0] = data[sent:]
                break
            buffer.popleft()
        if self.paused and self.buffered <= self.low:
            self.paused = False
            self.protocol.resume_writing()
        if not buffer and not self.lost:
            self.loop.remove_writer(self.fd)
            if self.closing:
                self._lose(None)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = 64 * 1024 if high is None else high
        self.low = self.high // 4 if low is None else low

    def get_write_buffer_size(self) -> int:
        return self.buffered

    # -- the end --

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self._stop_reading()
        if not self.buffer:
            self._lose(None)

    def abort(self) -> None:
        self._force_close(None)

    def _force_close(self, exc) -> None:
        if self.lost:
            return
        if self.buffer:
            self.buffer.clear()
            self.buffered = 0
            self.loop.remove_writer(self.fd)
        self.closing = True
        self._stop_reading()
        self._lose(exc)

    def _lose(self, exc) -> None:
        self.lost = True
        self.loop.call_soon(self._connection_lost, exc)

    def _connection_lost(self, exc) -> None:
        try:
            self.protocol.connection_lost(exc)
        finally:
            self.sock.close()

    def get_extra_info(self, name: str, default=None):
        if name == "socket":
            return self.sock
        if name == "peername":
            return self.peer
        if name == "sockname":
            try:
                return self.sock.getsockname()
            except OSError:
                return default
        return default


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class LineServer:
    def __init__(self, served: Served, options: ServeOptions, log: EventLog):
        self.served = served
        self.options = options
        self.log = log
        self.connections = set()
        self.stopping = False
        self.listening = None
        self.loop = None
        self.backlog = min(4096, options.max_connections)
        self.write_buffer_limit = 1 << 20

    async def start(self, sock: socket.socket) -> None:
        """Accept connections on ``sock`` (a listening socket) from the running loop."""
        self.loop = asyncio.get_running_loop()
        self.listening = sock
        sock.setblocking(False)
        sock.listen(self.backlog)
        self.loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        """The waiting connections (at most a backlog's worth a call), each a ``LineConnection`` on a
        ``SocketTransport``. Out of file descriptors or memory: accepting pauses for a second."""
        sock = self.listening
        for _ in range(self.backlog):
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                self.log("accept_failed", "error", error=str(exc), note="accepting again in 1 s")
                self.loop.remove_reader(sock.fileno())
                self.loop.call_later(1.0, self._accept_again)
                return
            conn.setblocking(False)
            SocketTransport(self.loop, conn, LineConnection(self), peer).start()

    def _accept_again(self) -> None:
        if not self.stopping and self.listening is not None:
            self.loop.add_reader(self.listening.fileno(), self._accept)

    def sweep_interval(self) -> float | None:
        timeout = self.options.idle_timeout
        return min(1.0, timeout / 4) if timeout else None

    def sweep_idle(self) -> None:
        """Close connections idle longer than --idle-timeout (a dead client holds nothing for long).
        Called every ``sweep_interval()`` seconds (``Ticker``). A connection's activity is its count
        of reads, compared with the previous sweep's (a read costs no clock reading): it is closed
        between ``timeout`` and ``timeout`` + one interval after its last read."""
        timeout = self.options.idle_timeout
        now = time.monotonic()
        for connection in list(self.connections):
            if connection.reads != connection.seen_reads:
                connection.seen_reads = connection.reads
                connection.last_active = now
            elif now - connection.last_active > timeout:
                self.log("idle_closed", peer=connection.peer, idle_seconds=round(now - connection.last_active, 1))
                transport = connection.transport
                if transport.get_write_buffer_size():
                    transport.abort()   # a client that stopped reading: its replies cannot be delivered
                else:
                    transport.close()

    async def stop(self, timeout: float) -> None:
        """Stop listening; every line already received has been answered; close the connections
        once their replies are written (at most ``timeout`` seconds)."""
        self.stopping = True
        if self.listening is not None:
            self.loop.remove_reader(self.listening.fileno())
            self.listening.close()
            self.listening = None
        for connection in list(self.connections):
            if connection.buffer:  # the start of a line whose end was not received: not a line
                data, connection.buffer = connection.buffer, b""
                connection._pending_changed()
                connection.transport.write(error_line(f"server shutting down: the line being received "
                                                      f"({len(data)} bytes, no end of line yet) was not read")
                                           + b"\n")
            connection.transport.close()
        deadline = time.monotonic() + timeout
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            connection.transport.abort()
        await asyncio.sleep(0)   # their connection_lost (called soon): the sockets closed
