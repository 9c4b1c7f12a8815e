"""The line protocol's transport (``SocketTransport``, olcli/serve_lines.py) on real loopback sockets and a
real asyncio loop: what it promises its protocol as asyncio's own socket transport does (the bytes written
arrive whole and in order, ``pause_writing`` above the high-water mark and ``resume_writing`` once the client
has read down to the low one, ``close`` ends the connection only after the kept bytes are sent, ``abort`` at
once, the client's end of stream is ``eof_received`` and then the close, ``connection_lost`` once)."""

import asyncio
import socket

from olcli.serve_lines import SocketTransport


class Recorder:
    def __init__(self):
        self.events = []
        self.received = b""
        self.lost = asyncio.Event()

    def connection_made(self, transport):
        self.events.append("made")

    def data_received(self, data):
        self.received += data

    def eof_received(self):
        self.events.append("eof")
        return False

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.lost.set()


def _pair():
    listening = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listening.getsockname())
    conn, peer = listening.accept()
    listening.close()
    conn.setblocking(False)
    client.setblocking(False)
    return client, conn, peer


def _started():
    """(loop, client socket, server socket, its peer address, Recorder, started SocketTransport) on a fresh
    loopback pair."""
    loop = asyncio.get_running_loop()
    client, conn, peer = _pair()
    protocol = Recorder()
    transport = SocketTransport(loop, conn, protocol, peer)
    transport.start()
    return loop, client, conn, peer, protocol, transport


async def _read_all(client, until: int, loop) -> bytes:
    got = b""
    while len(got) < until:
        try:
            chunk = client.recv(1 << 16)
        except BlockingIOError:
            await asyncio.sleep(0.001)
            continue
        if not chunk:
            break
        got += chunk
    return got


def test_flow_control_and_close_after_the_kept_bytes():
    async def main():
        loop, client, conn, peer, protocol, transport = _started()
        transport.set_write_buffer_limits(high=1 << 16)
        assert transport.get_extra_info("peername") == peer and transport.get_extra_info("socket") is conn
        data = bytes(range(256)) * (1 << 14)           # 4 MiB: more than the sockets' buffers take
        for k in range(0, len(data), 1 << 18):
            transport.write(data[k:k + (1 << 18)])
        assert transport.get_write_buffer_size() > 1 << 16 and protocol.events == ["made", "pause"]
        transport.close()
        assert transport.is_closing() and not protocol.lost.is_set()   # the kept bytes first
        got = await _read_all(client, len(data) + 1, loop)
        await asyncio.wait_for(protocol.lost.wait(), 10)
        assert got == data
        assert protocol.events == ["made", "pause", "resume", "lost"]
        assert conn.fileno() == -1
        client.close()

    asyncio.run(main())


def test_reads_end_of_stream_then_closes():
    async def main():
        loop, client, conn, peer, protocol, transport = _started()
        client.sendall(b"1 |a x\n2 |a y\n")
        client.shutdown(socket.SHUT_WR)
        await asyncio.wait_for(protocol.lost.wait(), 10)
        assert protocol.received == b"1 |a x\n2 |a y\n"
        assert protocol.events == ["made", "eof", "lost"]
        assert await _read_all(client, 1, loop) == b""   # closed by the server
        client.close()

    asyncio.run(main())


def test_abort_drops_the_kept_bytes():
    async def main():
        loop, client, conn, peer, protocol, transport = _started()
        data = b"x" * (8 << 20)
        transport.write(data)
        kept = transport.get_write_buffer_size()
        assert kept > 0
        transport.abort()
        transport.write(b"more")                        # after the end: nothing
        await asyncio.wait_for(protocol.lost.wait(), 10)
        assert transport.get_write_buffer_size() == 0 and protocol.events.count("lost") == 1
        try:
            got = await _read_all(client, len(data), loop)
        except ConnectionResetError:
            got = b""
        assert len(got) <= len(data) - kept
        client.close()

    asyncio.run(main())
