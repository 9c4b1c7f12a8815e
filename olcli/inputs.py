"""Input sources: files, .gz, .bz2 and standard input, read in large binary chunks.

Each chunk holds whole lines (the last one may lack '\\n' at end of file), so the
parser never sees a line cut in two. A UTF-8 byte order mark at the start of a
source is dropped. A chunk is read in pieces of READ_PIECE bytes, so that when a
damaged archive stops the stream, the whole lines before the damage are still
delivered (less at most one piece) before the error. Each chunk also carries how far
into the inputs (in bytes on disk, compressed for .gz/.bz2) reading had come, for
``--progress``.
"""

import bz2
import gzip
import os
import stat
import sys
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from olcli.errors import DataError

CHUNK_BYTES = 1 << 21
READ_PIECE = 1 << 16
_READ_ERRORS = (OSError, EOFError, ValueError)  # gzip/bz2 raise these for damaged archives
_BOM = b"\xef\xbb\xbf"


@dataclass
class Chunk:
    source: str        # file name as given, or "<stdin>"
    first_line: int    # 1-based number of the chunk's first line in its source
    data: np.ndarray   # uint8, whole lines
    position: int | None = None  # bytes on disk read so far, earlier inputs included; None for stdin


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def open_source(path: str):
    """(binary file object of the lines, the file on disk or None) for a path,
    '-' meaning standard input (no file on disk)."""
    if path == "-":
        return sys.stdin.buffer, None
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw, "rb"), raw
    return raw, raw


def input_size(paths: Sequence[str]) -> int | None:
    """Total bytes on disk of the inputs, or None when one has no known size
    (standard input, a pipe)."""
    total = 0
    for path in paths:
        if path == "-":
            return None
        try:
            status = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(status.st_mode):
            return None
        total += status.st_size
    return total


def check_readable(paths: Sequence[str]) -> None:
    """Refuse missing or unreadable inputs before any work starts."""
    for path in paths:
        if path == "-":
            continue
        if not os.path.exists(path):
            raise DataError(f"input file {path} does not exist")
        if os.path.isdir(path):
            raise DataError(f"input {path} is a directory, not a data file")
        if not os.access(path, os.R_OK):
            raise DataError(f"input file {path} is not readable (check its permissions)")


def read_chunks(paths: Sequence[str], chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    before = 0  # bytes on disk of the inputs already read
    for path in paths:
        name = display_name(path)
        stream, raw = open_source(path)
        try:
            for chunk in _chunks_of(stream, name, chunk_bytes):
                chunk.position = None if raw is None else before + raw.tell()
                yield chunk
            if raw is not None:
                before += raw.tell()
        except _READ_ERRORS as exc:
            raise DataError(f"cannot read {name}: {exc}") from exc
        finally:
            if raw is not None:
                stream.close()
                raw.close()


def _read_pieces(stream, size: int):
    """(pieces of up to ``size`` bytes in all, the read error or None). Read in
    pieces: an error loses only the piece being read."""
    pieces = []
    got = 0
    while got < size:
        try:
            piece = stream.read(min(READ_PIECE, size - got))
        except _READ_ERRORS as exc:
            return pieces, exc
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return pieces, None


def _chunks_of(stream, name: str, chunk_bytes: int) -> Iterator[Chunk]:
    carry = b""
    line = 1
    first = True
    while True:
        pieces, error = _read_pieces(stream, chunk_bytes)
        if not pieces and error is None:
            break
        if first:
            first = False
            if pieces and pieces[0].startswith(_BOM):
                pieces[0] = pieces[0][len(_BOM):]
        data = b"".join([carry, *pieces])  # one copy: the carried partial line and the new bytes
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


def detect_format(data: np.ndarray) -> str:
    """'vw' if the first non-blank line has a '|', else 'libsvm'."""
    raw = data[: 1 << 16].tobytes()
    for line in raw.split(b"\n"):
        if line.strip():
            return "vw" if b"|" in line else "libsvm"
    return "vw"
