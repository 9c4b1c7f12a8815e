"""Input sources: files, compressed files and streams, read in large binary chunks.

A source is a path (a regular file, a FIFO, ``<(zcat x)``, ``/dev/stdin``, a
``/dev/fd/N`` descriptor, a UNIX socket) or ``-`` for standard input. It is read
strictly forward, never seeked, so any readable stream works. Compression is
recognized by peeking at the first bytes (gzip, bzip2, xz), whatever the file is
called; data that is not compressed is read as it is, also from a file named
``.gz`` (as ``zcat -f`` and VW do).

Each chunk holds whole lines (the last one may lack '\\n' at end of file), so the
parser never sees a line cut in two. At the start of a source a UTF-8 byte order
mark is dropped, a file whose lines end in a bare '\\r' (old Mac style) is read
with those as line ends, and UTF-16/UTF-32 text or binary data (a byte order
mark, or many NUL bytes) is refused with a message saying so. A chunk is read in
pieces of READ_PIECE bytes, so that when a damaged archive stops the stream, the
whole lines before the damage are still delivered (less at most one piece)
before the error. An input's first chunk is FIRST_CHUNK_BYTES and each next one
twice the one before, up to the chunk size (CHUNK_BYTES, 2 MiB): learning starts
once 64 KiB are parsed instead of 2 MiB, while the parse workers read the larger
chunks after it (on the text generator the first 2 MiB parse was 40-65 ms of a
0.5 s run, the learner idle). Each chunk also carries how far into the inputs (in bytes read
from disk or the stream, compressed for compressed data) reading had come, for
``--progress``.
"""

import io
import os
import re
import stat
import sys
from typing import Iterator, Sequence

import numpy as np

from olcli.errors import DataError
from olcli.paths import check_input, fd_alias
from olcli.records import Record

CHUNK_BYTES = 1 << 21
FIRST_CHUNK_BYTES = 1 << 16    # an input's first chunk; each next one twice the last, up to CHUNK_BYTES
READ_PIECE = 1 << 16
SNIFF_BYTES = 1 << 16          # what the start-of-source checks and format detection look at
READ_ERRORS = (OSError, EOFError, ValueError)  # gzip/bz2 raise these for damaged archives
_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16",
              b"\xfe\xff": "UTF-16"}
MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))   # compressed files' first bytes


class Chunk(Record):
    """Whole lines of one input: ``source`` the file name as given, or "<stdin>";
    ``first_line`` the 1-based number of the chunk's first line in its source; ``data``
    uint8; ``position`` the bytes read so far from disk or stream, earlier inputs included."""
    _fields = ("source", "first_line", "data", "position")

    def __init__(self, source: str, first_line: int, data: np.ndarray, position: int | None = None):
        self.source, self.first_line, self.data, self.position = source, first_line, data, position


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


class _Counted(io.RawIOBase):
    """A forward-only raw reader: serves ``prefix`` (the peeked bytes) first, then
    the underlying stream, and counts the bytes it took from the stream."""

    def __init__(self, raw, prefix: bytes, counted: int):
        self.raw, self.prefix, self.count = raw, prefix, counted

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n] = self.prefix[:n]
            self.prefix = self.prefix[n:]
            return n
        got = self.raw.readinto(buffer)
        self.count += got or 0
        return got

    def close(self):
        try:
            if self.raw is not getattr(sys.stdin, "buffer", None):  # standard input stays open
                self.raw.close()
        finally:
            super().close()


def _open_raw(path: str):
    """The unbuffered byte stream of a source, never reopening a descriptor."""
    if path == "-":
        return sys.stdin.buffer
    fd = fd_alias(path)
    if fd is not None:
        return io.FileIO(os.dup(fd), "rb")
    if stat.S_ISSOCK(os.stat(path).st_mode):
        import socket

        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(path)
        return connection.makefile("rb", buffering=0)
    return io.FileIO(path, "rb")


def open_source(path: str):
    """(binary stream of the source's text, decompressed; the _Counted reader of
    the bytes underneath, for the position)."""
    name = display_name(path)
    try:
        raw = _open_raw(path)
    except OSError as exc:
        raise DataError(f"cannot read {name}: {exc.strerror or exc}") from exc
    try:
        prefix = b""
        while len(prefix) < 6:  # a pipe may deliver the first bytes one at a time
            piece = raw.read(6 - len(prefix))
            if not piece:
                break
            prefix += piece
    except OSError as exc:
        raw.close()
        raise DataError(f"cannot read {name}: {exc.strerror or exc}") from exc
    counted = _Counted(raw, prefix, len(prefix))
    buffered = io.BufferedReader(counted, buffer_size=READ_PIECE)
    for magic, kind in MAGIC:
        if prefix.startswith(magic):   # the decompressors imported only for compressed data
            if kind == "gzip":
                import gzip

                return gzip.GzipFile(fileobj=buffered, mode="rb"), counted
            if kind == "bzip2":
                import bz2

                return bz2.BZ2File(buffered, "rb"), counted
            import lzma

            return lzma.LZMAFile(buffered, "rb"), counted
    return buffered, counted


def input_size(paths: Sequence[str]) -> int | None:
    """Total bytes on disk of the inputs, or None when one has no known size
    (standard input, a pipe, a socket)."""
    total = 0
    for path in paths:
        if path == "-" or fd_alias(path) is not None:
            return None
        try:
            status = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(status.st_mode):
            return None
        total += status.st_size
    return total


def is_stream(path: str) -> bool:
    """Whether a source can be read only once (stdin, a FIFO, a descriptor, a socket):
    such data can never be checked against a cache, and its cache is temporary."""
    if path == "-" or fd_alias(path) is not None:
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def check_readable(paths: Sequence[str]) -> None:
    """Refuse missing, unreadable or closed inputs before any work starts."""
    for path in paths:
        check_input(path)


def read_chunks(paths: Sequence[str], chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    before = 0  # bytes of the inputs already read
    for path in paths:
        name = display_name(path)
        stream, counted = open_source(path)
        for chunk in chunks_of(stream, counted, name, chunk_bytes):
            chunk.position = before + counted.count
            yield chunk
        before += counted.count


def chunks_of(stream, counted, name: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """The whole-line chunks of an opened input (``stream`` reads through
    ``counted``, as open_source returns them); a read error becomes a DataError
    naming the input, and both are closed however the reading ends."""
    try:
        yield from _chunks_of(stream, name, chunk_bytes)
    except READ_ERRORS as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"cannot read {name}: {exc}") from exc
    finally:
        stream.close()
        counted.close()


def _read_pieces(stream, size: int):
    """(pieces of up to ``size`` bytes in all, the read error or None). Read in
    pieces: an error loses only the piece being read."""
    pieces = []
    got = 0
    while got < size:
        try:
            piece = stream.read(min(READ_PIECE, size - got))
        except READ_ERRORS as exc:
            return pieces, exc
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return pieces, None


def check_text(start: bytes, name: str) -> bool:
    """Refuse wide (UTF-16/32) or binary text at the start of a source; returns
    True when its lines end in a bare '\\r' (to be read as line ends)."""
    for bom, encoding in _WIDE_BOMS.items():
        if start.startswith(bom):
            raise DataError(f"{name} is {encoding} text (byte order mark {bom.hex(' ')}); olcli reads UTF-8 or "
                            f"ASCII: convert it first, e.g. iconv -f {encoding} -t UTF-8 {name} > new.vw")
    sample = start[:SNIFF_BYTES]
    nul = sample.count(0)
    if nul >= 16 and nul * 10 >= len(sample):
        raise DataError(f"{name} does not look like text: {100 * nul // len(sample)}% of its first "
                        f"{len(sample)} bytes are NUL (UTF-16 text, or binary data?); olcli reads UTF-8 or ASCII "
                        f"lines (convert UTF-16 with iconv -f UTF-16 -t UTF-8)")
    return b"\r" in sample and b"\n" not in sample


def chunk_sizes(chunk_bytes: int = CHUNK_BYTES) -> Iterator[int]:
    """The bytes read for each chunk of an input, in order (lines cut at the last
    line end, so a chunk holds at most this plus the line carried over)."""
    size = min(FIRST_CHUNK_BYTES, chunk_bytes)
    while True:
        yield size
        size = min(2 * size, chunk_bytes)


def _chunks_of(stream, name: str, chunk_bytes: int) -> Iterator[Chunk]:
    carry = b""
    line = 1
    first = True
    carriage_returns = False
    for size in chunk_sizes(chunk_bytes):
        pieces, error = _read_pieces(stream, size)
        if not pieces and error is None:
            break
        data = b"".join([carry, *pieces])  # one copy: the carried partial line and the new bytes
        if first:
            first = False
            if data.startswith(_BOM):
                data = data[len(_BOM):]
            carriage_returns = check_text(data, name)
        if carriage_returns:
            data = data.replace(b"\r", b"\n")
        cut = data.rfind(b"\n")
        if error is not None:  # deliver the whole lines before the damage, then stop
            if cut >= 0:
                yield Chunk(name, line, np.frombuffer(data, dtype=np.uint8, count=cut + 1))
            raise error
        if cut < 0:
            carry = data
            continue
        yield Chunk(name, line, np.frombuffer(data, dtype=np.uint8, count=cut + 1))
        line += data.count(b"\n", 0, cut + 1)
        carry = data[cut + 1:]
    if carry:
        yield Chunk(name, line, np.frombuffer(carry, dtype=np.uint8))


_LIBSVM_LINE = re.compile(rb"^[ \t]*[-+]?[0-9.][0-9.eE+-]*([ \t]+(qid:[^ \t]+|[0-9]+:[^ \t]+))*[ \t]*(#.*)?\r?$")
DETECT_LINES = 1000


def vote_format(data: np.ndarray) -> str | None:
    """The format most of the first non-blank lines (up to DETECT_LINES, within
    SNIFF_BYTES) have: a line with a '|' votes VW, a line of ``label index:value
    ...`` votes libsvm, anything else does not vote (a garbage first line cannot
    decide). None when no line voted; ties go to VW."""
    raw = data[:SNIFF_BYTES].tobytes()
    vw = libsvm = looked = 0
    lines = raw.split(b"\n")
    if len(raw) == SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    for line in lines:
        if not line.strip():
            continue
        looked += 1
        if b"|" in line:
            vw += 1
        elif _LIBSVM_LINE.match(line):
            libsvm += 1
        if looked >= DETECT_LINES:
            break
    if vw == 0 and libsvm == 0:
        return None
    return "vw" if vw >= libsvm else "libsvm"


def detect_format(data: np.ndarray) -> str:
    """'vw' or 'libsvm' by vote_format (VW when no line says)."""
    return vote_format(data) or "vw"
