"""The example cache for --passes: parsed examples stored as checksummed binary blocks.

Pass 1 parses the text and appends each parsed chunk here as a block; later passes
read the blocks back instead of the text (so passes over stdin work). Layout
(integers little-endian)::

    magic b"OLCLICCH", uint32 version, uint32 header size, JSON header,
    uint32 CRC-32 of the JSON header
    per block: int64 n_examples, int64 n_features, int64 tag_bytes, then
        labels f8[n], importance f8[n], base f8[n], feature_count i8[n],
        row_ptr i8[n+1], tag_offsets i8[n+1], value f8[nf], index i4[nf], tags u1[tag_bytes],
        uint32 CRC-32 of the block (its three counts and its arrays)

The header holds the options the cache was built with (format option, -b,
constant, label kind, interactions, namespace filters) and the data files it was
built from. Nothing in a cache is trusted: every block's sizes are checked
against the bytes left in the file before anything is allocated, its checksum is
verified, and its contents (row pointers, table indices, finite numbers, labels
the loss can take) are checked before the kernels see them. A cache that fails
any check is rebuilt from the data (with a warning) when it is about to be
reused, and stops the run with a message when it is damaged while the run reads
it.

The file is written under a temporary name and renamed when pass 1 completes,
so a cache is always whole.
"""

import json
import os
import struct
import zlib

import numpy as np

from olcli import signals
from olcli.errors import DataError
from olcli.paths import OutputError, error_name, write_all
from olcli.records import Record

MAGIC = b"OLCLICCH"
VERSION = 3
_PREFIX = struct.Struct("<8sII")
_RECORD = struct.Struct("<qqq")
_CRC = struct.Struct("<I")


class CacheError(DataError):
    """A cache file that is damaged or does not match (the message says how)."""


class CachedChunk(Record):
    """A parsed chunk read back from the cache, shaped like parsing.ParsedChunk (``tags``:
    (n, 2) spans into ``data``, the tag bytes)."""
    _fields = ("n_examples", "labels", "importance", "base", "feature_count", "row_ptr", "tags", "index", "value",
               "data", "bad_lines")

    def __init__(self, n_examples: int, labels: np.ndarray, importance: np.ndarray, base: np.ndarray,
                 feature_count: np.ndarray, row_ptr: np.ndarray, tags: np.ndarray, index: np.ndarray,
                 value: np.ndarray, data: np.ndarray, bad_lines: tuple = ()):
        self.n_examples, self.labels, self.importance, self.base = n_examples, labels, importance, base
        self.feature_count, self.row_ptr, self.tags, self.index = feature_count, row_ptr, tags, index
        self.value, self.data, self.bad_lines = value, data, bad_lines


def fingerprint(sources: list) -> list:
    """What identifies the data files: absolute path and size."""
    out = []
    for path in sources:
        try:
            info = os.stat(path) if path != "-" else None
        except OSError:
            info = None
        if info is None:
            out.append({"path": path})
        else:
            out.append({"path": os.path.abspath(path), "size": info.st_size})
    return out


def _block_bytes(n: int, nf: int, tag_bytes: int) -> int:
    return 8 * (4 * n + 2 * (n + 1)) + 12 * nf + tag_bytes


def _read_header(f, path: str, size: int) -> dict:
    start = f.read(_PREFIX.size)
    if len(start) < _PREFIX.size:
        raise CacheError(f"{path} is too short to be an example cache")
    magic, version, header_size = _PREFIX.unpack(start)
    if magic != MAGIC:
        raise CacheError(f"{path} is not an olcli example cache")
    if version != VERSION:
        raise CacheError(f"{path} is an example cache of another olcli version (format {version}, this olcli "
                         f"writes {VERSION})")
    if header_size > size - _PREFIX.size - _CRC.size:
        raise CacheError(f"{path} is truncated (its header runs past the end of the file)")
    encoded = f.read(header_size)
    (crc,) = _CRC.unpack(f.read(_CRC.size))
    if zlib.crc32(encoded) != crc:
        raise CacheError(f"{path} is damaged (header checksum mismatch)")
    try:
        found = json.loads(encoded)
    except ValueError:
        raise CacheError(f"{path} is damaged (unreadable header)") from None
    if not isinstance(found, dict):
        raise CacheError(f"{path} is damaged (unreadable header)")
    return found


def header(path: str) -> dict:
    with open(path, "rb") as f:
        return _read_header(f, path, os.fstat(f.fileno()).st_size)


def _describe(key: str, found, expected) -> str:
    if key == "parse" and isinstance(found, dict) and isinstance(expected, dict):
        changed = [f"{name} {found.get(name)!r}, now {value!r}" for name, value in expected.items()
                   if found.get(name) != value]
        return "it was built with other options (" + "; ".join(changed) + ")"
    if key == "sources":
        return "it was built from other data files"
    return f"it was built by another olcli ({key} {found!r})"


def check(path: str, expected: dict, sources: list, bits: int, label_kind: int) -> str | None:
    """Why an existing cache cannot stand in for reading the data (None: it can).
    Reads the whole file: every block's checksum and contents are verified."""
    try:
        cache_time = os.stat(path).st_mtime_ns
        if any(os.stat(source).st_mtime_ns >= cache_time for source in sources):
            return "the data changed after it was built"
        with open(path, "rb") as f:
            found = _read_header(f, path, os.fstat(f.fileno()).st_size)
        for key, value in expected.items():
            if found.get(key) != value:
                return _describe(key, found.get(key), value)
        for _ in read(path, bits, label_kind):
            pass
    except CacheError as exc:
        return str(exc).replace(f"{path} ", "it ", 1) if str(exc).startswith(path) else str(exc)
    except OSError as exc:
        return f"it cannot be read ({error_name(exc)})"
    return None


class CacheWriter:
    def __init__(self, path: str, header: dict):
        self.path = os.path.realpath(path)
        self.shown = path
        directory = os.path.dirname(self.path)
        self.temporary = None
        import tempfile   # here: with shutil and random, ~2-6 ms of every start, for a run that writes a cache

        try:
            with signals.critical():
                fd, self.temporary = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", suffix=".tmp",
                                                      dir=directory)
            self.out = os.fdopen(fd, "wb")
            encoded = json.dumps(header, sort_keys=True).encode()
            write_all(self.out, _PREFIX.pack(MAGIC, VERSION, len(encoded)) + encoded + _CRC.pack(zlib.crc32(encoded)))
        except OSError as exc:
            self.abort()
            raise OutputError(f"cannot write the example cache {path}: {error_name(exc)}") from exc

    def add(self, parsed, data: np.ndarray) -> None:
        n = parsed.n_examples
        spans = parsed.tags[:n]
        lengths = spans[:, 1] - spans[:, 0]
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tag_bytes = b"".join(data[a:b].tobytes() for a, b in spans if b > a) if lengths.any() else b""
        nf = int(parsed.row_ptr[n])
        parts = [_RECORD.pack(n, nf, len(tag_bytes))]
        for array, dtype in ((parsed.labels[:n], "<f8"), (parsed.importance[:n], "<f8"), (parsed.base[:n], "<f8"),
                             (parsed.feature_count[:n], "<i8"), (parsed.row_ptr[:n + 1], "<i8"),
                             (offsets, "<i8"), (parsed.value[:nf], "<f8"), (parsed.index[:nf], "<i4")):
            parts.append(np.ascontiguousarray(array, dtype=dtype).tobytes())
        parts.append(tag_bytes)
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
        parts.append(_CRC.pack(crc))
        try:
            write_all(self.out, b"".join(parts))
        except OSError as exc:
            raise OutputError(f"cannot write the example cache {self.shown}: {error_name(exc)}") from exc

    def commit(self) -> None:
        try:
            self.out.flush()
            os.fsync(self.out.fileno())
            self.out.close()
            with signals.critical():
                os.replace(self.temporary, self.path)
                self.temporary = None
        except OSError as exc:
            raise OutputError(f"cannot write the example cache {self.shown}: {error_name(exc)}") from exc

    def abort(self) -> None:
        with signals.critical():
            out = getattr(self, "out", None)
            if out is not None and not out.closed:
                try:
                    out.close()
                except OSError:
                    pass
            if self.temporary is not None:
                try:
                    os.unlink(self.temporary)
                except OSError:
                    pass
                self.temporary = None


def _check_block(path: str, number: int, bits: int, label_kind: int, n: int, nf: int, tag_bytes: int,
                 labels, importance, base, feature_count, row_ptr, offsets, index, value) -> None:
    def damaged(what):
        raise CacheError(f"{path} is damaged (block {number}: {what})")

    if row_ptr[0] != 0 or row_ptr[n] != nf or (n and np.any(np.diff(row_ptr) < 0)):
        damaged("feature offsets out of order")
    if offsets[0] != 0 or offsets[n] != tag_bytes or (n and np.any(np.diff(offsets) < 0)):
        damaged("tag offsets out of order")
    if nf and (int(index.min()) < 0 or int(index.max()) > (1 << bits)):
        damaged(f"a feature index outside the table of -b {bits}")
    if not np.all(np.isfinite(value)):
        damaged("a feature value that is not a finite number")
    if not (np.all(np.isfinite(importance)) and np.all(importance >= 0)):
        damaged("an importance that is not a finite number >= 0")
    if not np.all(np.isfinite(base)) or np.any(feature_count < 0):
        damaged("a base or feature count out of range")
    labeled = labels[~np.isnan(labels)]
    if not np.all(np.isfinite(labeled)):
        damaged("an infinite label")
    if label_kind == 1 and not np.all((labeled == 1.0) | (labeled == -1.0)):
        damaged("a label other than -1/+1")
    # the parser's classes (engine/parse.py _check_label): 1..K, and 0 for VW's 0-indexed labels
    if label_kind >= 2 and not np.all((labeled == np.floor(labeled)) & (labeled >= 0) & (labeled <= label_kind)):
        damaged(f"a label outside 0..{label_kind}")


def read(path: str, bits: int, label_kind: int):
    """Yield CachedChunk objects from a cache file, each block checked (CacheError
    at the first damaged one). The arrays are writable (the kernels are compiled
    for writable arrays; a read-only view would compile them again)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        _read_header(f, path, size)
        number = 0
        while True:
            head = f.read(_RECORD.size)
            if not head:
                return
            number += 1
            if len(head) < _RECORD.size:
                raise CacheError(f"{path} is truncated (block {number})")
            n, nf, tag_bytes = _RECORD.unpack(head)
            left = size - f.tell()
            if min(n, nf, tag_bytes) < 0 or _block_bytes(n, nf, tag_bytes) + _CRC.size > left:
                raise CacheError(f"{path} is damaged or truncated (block {number} claims {n} examples and "
                                 f"{nf} features, more than the {left} bytes left)")
            body = bytearray(_block_bytes(n, nf, tag_bytes))
            if f.readinto(body) != len(body):
                raise CacheError(f"{path} is truncated (block {number})")
            (crc,) = _CRC.unpack(f.read(_CRC.size))
            if zlib.crc32(body, zlib.crc32(head)) != crc:
                raise CacheError(f"{path} is damaged (block {number}: checksum mismatch)")
            at = 0

            def take(dtype, count):
                nonlocal at
                array = np.frombuffer(body, dtype, count, at)
                at += array.nbytes
                return array

            labels, importance, base = take("<f8", n), take("<f8", n), take("<f8", n)
            feature_count, row_ptr, offsets = take("<i8", n), take("<i8", n + 1), take("<i8", n + 1)
            value, index = take("<f8", nf), take("<i4", nf)  # 8-byte arrays first: all aligned
            data = take("u1", tag_bytes)
            data.setflags(write=False)  # like a text chunk's bytes: one compiled signature for both
            _check_block(path, number, bits, label_kind, n, nf, tag_bytes, labels, importance, base,
                         feature_count, row_ptr, offsets, index, value)
            tags = np.stack([offsets[:-1], offsets[1:]], axis=1) if n else np.zeros((0, 2), np.int64)
            yield CachedChunk(n, labels, importance, base, feature_count, row_ptr, tags, index, value, data)
