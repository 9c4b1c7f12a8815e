"""The data of a run on a Dask cluster cut into shards, and a shard read back.

Each input file is a shard; an uncompressed file is cut into byte ranges at line ends so that
there are about as many shards as asked (``cut_shards``). Compressed files and the shard
boundaries are read by the workers themselves, at the same path (a shared file system, as for
any Dask job that reads files), through the CLI's own chunk reader (``shard_chunks``).
"""

import io
import os
from dataclasses import dataclass

from olcli.errors import DataError, UsageError
from olcli.inputs import CHUNK_BYTES, MAGIC, chunks_of, is_stream, open_source

FEATURE = "--workers/--scheduler (training on a Dask cluster)"



@dataclass(frozen=True)
class Shard:
    """One task's part of the data: a whole file, or bytes [start, end) of an
    uncompressed one (whole lines)."""
    index: int
    name: str           # the path as given (messages)
    path: str           # absolute path, as the workers open it
    start: int = 0
    end: int | None = None   # None: to the end of the file (always for compressed files)

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end is None

    def describe(self) -> str:
        if self.whole:
            return self.name
        return f"{self.name} bytes {self.start}-{self.end}"


_PEEK = 6
_SCAN = 1 << 16


def _compressed(path: str) -> bool:
    with open(path, "rb") as f:
        start = f.read(_PEEK)
    return any(start.startswith(magic) for magic, _ in MAGIC)


def _line_start_near(f, nominal: int, low: int, size: int) -> int:
    """The start of a line (just after a '\\n') nearest to ``nominal``, above ``low``
    and below ``size``; ``size`` when there is none."""
    after = size
    f.seek(nominal)
    position = nominal
    while position < size:
        piece = f.read(_SCAN)
        if not piece:
            break
        found = piece.find(b"\n")
        if found >= 0:
            after = position + found + 1
            break
        position += len(piece)
    start = max(low, nominal - _SCAN)
    found = _peek(f, start, nominal - start).rfind(b"\n") if nominal > start else -1
    before = start + found + 1 if found >= 0 else low
    candidates = [c for c in (before, after) if low < c < size]
    return min(candidates, key=lambda c: abs(c - nominal)) if candidates else size


def refuse_streams(sources: list) -> None:
    """Standard input, pipes and sockets cannot be sharded: the workers read the files."""
    for source in sources:
        if is_stream(source):
            what = "standard input" if source == "-" else f"{source} (a pipe, socket or descriptor)"
            raise UsageError(f"{FEATURE} reads DATA files on the workers, so {what} cannot be used: "
                             "write the data to a file (on a file system every worker sees) first")


def cut_shards(sources: list, count: int) -> list:
    """The shards of ``sources``, in input order: every file at least one shard,
    uncompressed files cut at line ends into byte ranges of about the total size
    (on disk) / ``count``, so about ``count`` shards of similar size in all.
    Standard input and pipes cannot be sharded (the workers read the files)."""
    refuse_streams(sources)
    files = []
    for source in sources:
        path = os.path.abspath(source)
        size = os.path.getsize(path)
        files.append((source, path, size, _compressed(path)))
    target = sum(size for _, _, size, _ in files) / max(1, count)
    shards = []
    for source, path, size, packed in files:
        parts = 1
        if not packed and size > 0 and target > 0:
            parts = max(1, int(round(size / target)))
        if parts == 1:
            shards.append(Shard(len(shards), source, path))
            continue
        cuts = [0]
        with open(path, "rb") as f:
            for k in range(1, parts):
                cut = _line_start_near(f, max(cuts[-1], size * k // parts), cuts[-1], size)
                if cut < size and cut > cuts[-1]:
                    cuts.append(cut)
            with_newlines = b"\n" in _peek(f, 0, _SCAN)
        if len(cuts) == 1 or not with_newlines:  # one line, or old-Mac '\r' lines: one shard
            shards.append(Shard(len(shards), source, path))
            continue
        cuts.append(size)
        for start, end in zip(cuts[:-1], cuts[1:]):
            shards.append(Shard(len(shards), source, path, start, end))
    return shards


def _peek(f, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


class _Range(io.RawIOBase):
    """Bytes [start, end) of a file, as a forward-only raw stream."""

    def __init__(self, path: str, start: int, end: int):
        self.file = io.FileIO(path, "rb")
        self.file.seek(start)
        self.left = end - start

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.left <= 0:
            return 0
        view = memoryview(buffer)[:min(len(buffer), self.left)]
        got = self.file.readinto(view)
        self.left -= got or 0
        return got

    def close(self):
        try:
            self.file.close()
        finally:
            super().close()


def shard_chunks(shard: Shard, first_line: int = 1, chunk_bytes: int | None = None):
    """The shard's text as ``inputs.Chunk``s of whole lines (the CLI's reader:
    decompression, BOM, line ends), numbered from ``first_line``."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    try:
        if shard.whole:
            stream, counted = open_source(shard.path)
        else:
            counted = _Range(shard.path, shard.start, shard.end)
            stream = io.BufferedReader(counted, buffer_size=1 << 16)
    except OSError as exc:
        raise DataError(f"cannot read {shard.name}: {exc.strerror or exc}") from exc
    for chunk in chunks_of(stream, counted, shard.name, chunk_bytes):
        chunk.first_line += first_line - 1
        yield chunk
