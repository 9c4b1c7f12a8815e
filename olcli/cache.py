"""The example cache for --passes: parsed examples stored as binary chunks.

Pass 1 parses the text and appends each parsed chunk here; later passes read
the chunks back instead of the text (so passes over stdin work). Layout::

    magic b"OLCLICCH", uint32 version, uint32 header size, JSON header
    per chunk: int64 n_examples, int64 n_features, int64 tag_bytes, then
        labels f8[n], importance f8[n], base f8[n], feature_count i8[n],
        row_ptr i8[n+1], tag_offsets i8[n+1], index i4[nf], value f8[nf], tags u1[tag_bytes]

The file is written to a temporary name and renamed when pass 1 completes, so
a cache is always whole. It is reused when it is newer than every data file and
its header (parse settings and data files) matches; ``-k`` rebuilds it.
"""

import json
import os
import struct
import tempfile
from dataclasses import dataclass

import numpy as np

MAGIC = b"OLCLICCH"
VERSION = 1
_PREFIX = struct.Struct("<8sII")
_RECORD = struct.Struct("<qqq")


@dataclass
class CachedChunk:
    """A parsed chunk read back from the cache, shaped like parsing.ParsedChunk."""
    n_examples: int
    labels: np.ndarray
    importance: np.ndarray
    base: np.ndarray
    feature_count: np.ndarray
    row_ptr: np.ndarray
    tags: np.ndarray       # (n, 2) spans into `data`
    index: np.ndarray
    value: np.ndarray
    data: np.ndarray       # the tag bytes
    bad_lines: tuple = ()


def fingerprint(sources: list) -> list:
    """What identifies the data files: absolute path, size, modification time."""
    out = []
    for path in sources:
        if path == "-":
            out.append({"path": "-"})
        else:
            info = os.stat(path)
            out.append({"path": os.path.abspath(path), "size": info.st_size})
    return out


def header(path: str) -> dict:
    with open(path, "rb") as f:
        _, _, size = _PREFIX.unpack(f.read(_PREFIX.size))
        return json.loads(f.read(size))


def usable(path: str, expected: dict, sources: list) -> bool:
    """Whether an existing cache can stand in for reading the data."""
    if "-" in sources or not os.path.exists(path):
        return False
    cache_time = os.stat(path).st_mtime_ns
    if any(os.stat(source).st_mtime_ns >= cache_time for source in sources):
        return False
    try:
        with open(path, "rb") as f:
            magic, version, size = _PREFIX.unpack(f.read(_PREFIX.size))
            if magic != MAGIC or version != VERSION:
                return False
            found = json.loads(f.read(size))
    except (OSError, ValueError, struct.error):
        return False
    return all(found.get(key) == value for key, value in expected.items())


class CacheWriter:
    def __init__(self, path: str, header: dict):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        fd, self.temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
        self.out = os.fdopen(fd, "wb")
        encoded = json.dumps(header, sort_keys=True).encode()
        self.out.write(_PREFIX.pack(MAGIC, VERSION, len(encoded)) + encoded)

    def add(self, parsed, data: np.ndarray) -> None:
        n = parsed.n_examples
        spans = parsed.tags[:n]
        lengths = spans[:, 1] - spans[:, 0]
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tag_bytes = b"".join(data[a:b].tobytes() for a, b in spans if b > a) if lengths.any() else b""
        nf = int(parsed.row_ptr[n])
        self.out.write(_RECORD.pack(n, nf, len(tag_bytes)))
        for array in (parsed.labels[:n], parsed.importance[:n], parsed.base[:n],
                      parsed.feature_count[:n].astype(np.int64), parsed.row_ptr[:n + 1], offsets,
                      parsed.index[:nf], parsed.value[:nf]):
            self.out.write(np.ascontiguousarray(array).tobytes())
        self.out.write(tag_bytes)

    def commit(self) -> None:
        self.out.flush()
        os.fsync(self.out.fileno())
        self.out.close()
        os.replace(self.temporary, self.path)

    def abort(self) -> None:
        if not self.out.closed:
            self.out.close()
        if os.path.exists(self.temporary):
            os.unlink(self.temporary)


def read(path: str):
    """Yield CachedChunk objects from a complete cache file."""
    with open(path, "rb") as f:
        _, _, size = _PREFIX.unpack(f.read(_PREFIX.size))
        f.seek(size, os.SEEK_CUR)
        while True:
            head = f.read(_RECORD.size)
            if not head:
                return
            n, nf, tag_bytes = _RECORD.unpack(head)

            def take(dtype, count):
                return np.frombuffer(f.read(np.dtype(dtype).itemsize * count), dtype, count)

            labels, importance, base = take("<f8", n), take("<f8", n), take("<f8", n)
            feature_count, row_ptr, offsets = take("<i8", n), take("<i8", n + 1), take("<i8", n + 1)
            index, value = take("<i4", nf), take("<f8", nf)
            data = take("u1", tag_bytes)
            tags = np.stack([offsets[:-1], offsets[1:]], axis=1) if n else np.zeros((0, 2), np.int64)
            yield CachedChunk(n, labels, importance, base, feature_count, row_ptr, tags, index, value, data)
