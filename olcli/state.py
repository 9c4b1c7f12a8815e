"""The weight table's memory: zeroed tables that cost only the pages written (``zeroed_state``:
the whole table built for a dense model file or for inspection; ``zeroed_index``), found again
by their written pages (``nonzero_rows``), and the sorting helpers of the row pool (olcli/row_pool.py,
the table as the rows its examples touched).
"""

import mmap
import os
import sys

import numpy as np


def table_rows(bits: int) -> int:
    """2**bits hashed rows plus one row for the constant, so it never collides."""
    return (1 << bits) + 1


# --- the table in memory: pay for the rows that are touched ---
#
# Every algorithm's state is all zeros in a row no example has touched (each
# initialises a row at its first touch: gd.py's G, scinol_common.raise_max's eps,
# coin's wealth stored without alpha). The table is an anonymous private mapping
# made with MAP_NORESERVE: the kernel hands out a page (4 KiB) only when it is
# first written, and does not count the whole mapping against the machine's memory
# up front, so a -b 28 table of 26 GiB costs what its touched pages cost.
# Everything that walks the table (saving, checking a loaded file, merging,
# inspect) walks its touched pages only: on Linux /proc/self/pagemap says which
# pages of the mapping were ever written (present or swapped); a page never
# written reads as zeros. Elsewhere, or for an array olcli did not map, the rows
# are found by a scan in blocks (no temporary as large as the table).

_MAP_NORESERVE = 0x4000            # Linux's value on x86 and arm (mmap(2)); Python's mmap lacks the name before 3.13
_MAPPED_FROM = 1 << 20             # smaller tables: np.zeros (calloc); the scan is cheap for them
_SCAN_ROWS = 1 << 16               # rows per block of a scan (the fallback's)


class _ZeroedMapping(mmap.mmap):
    """An anonymous private mapping made by ``zeroed_state``: its pages never
    written are zeros (what ``nonzero_rows`` relies on)."""


def _mapped_size(nbytes: int) -> bool:
    """Whether ``zeroed_state`` maps a table of ``nbytes`` (else np.zeros)."""
    return nbytes >= _MAPPED_FROM and sys.platform.startswith("linux")


def zeroed_state(rows: int, slots: int, dtype=np.float64) -> np.ndarray:
    """A (rows, slots) table of zeros whose pages cost memory only once written."""
    nbytes = rows * slots * np.dtype(dtype).itemsize
    if not _mapped_size(nbytes):
        return np.zeros((rows, slots), dtype)
    mapping = _ZeroedMapping(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
    return np.frombuffer(mapping, dtype).reshape(rows, slots)


def zeroed_index(count: int, dtype=np.int32) -> np.ndarray:
    """``count`` zeros (int32 unless ``dtype``) whose pages cost memory only once written: a
    mapping like ``zeroed_state``'s, not np.zeros (NumPy asks the kernel for 2 MiB pages on a
    large array, and a single entry written would then cost 2 MiB)."""
    return zeroed_state(count, 1, dtype).reshape(count)


def _root(state: np.ndarray):
    base = state
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return base


def _mapped(state: np.ndarray) -> bool:
    return isinstance(_root(state), _ZeroedMapping)


def _shared_rows(state: np.ndarray):
    """The non-zero rows of a whole read-only shared table (olcli/shared_table.py), or None."""
    module = sys.modules.get("olcli.shared_table")   # not imported: no shared table exists
    base = _root(state)
    if (module is not None and isinstance(base, module.SharedTable) and hasattr(base, "rows")
            and state.nbytes == len(base)
            and state.__array_interface__["data"][0] == np.frombuffer(base, np.uint8).__array_interface__["data"][0]):
        return base.rows.copy()
    return None


def _written_pages(state: np.ndarray):
    """Byte offsets (from the table's start) of the pages of a ``zeroed_state``
    table that were ever written, from /proc/self/pagemap (bit 63: present, bit 62:
    swapped); None when that cannot be read."""
    page = mmap.PAGESIZE
    start = state.__array_interface__["data"][0]
    first, last = start // page, (start + state.nbytes - 1) // page
    found = []
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return None
    try:
        step = 1 << 18
        for at in range(first, last + 1, step):
            count = min(step, last + 1 - at)
            raw = os.pread(fd, count * 8, at * 8)
            if len(raw) != count * 8:
                return None
            entries = np.frombuffer(raw, np.uint64)
            found.append(np.flatnonzero(entries >> np.uint64(62)).astype(np.int64) + at)
    except OSError:
        return None
    finally:
        os.close(fd)
    pages = np.concatenate(found) if found else np.zeros(0, np.int64)
    return pages * page - start


def nonzero_rows(state: np.ndarray) -> np.ndarray:
    """The rows (int64, increasing) of a 2-d table that hold a non-zero value: for a
    ``zeroed_state`` table, found among its written pages only."""
    rows, slots = state.shape
    shared = _shared_rows(state)
    if shared is not None:
        return shared
    aligned = state.__array_interface__["data"][0] % mmap.PAGESIZE == 0
    offsets = (_written_pages(state) if _mapped(state) and aligned and state.flags.c_contiguous and state.size
               else None)
    if offsets is None:
        found = [np.flatnonzero(np.any(state[a:a + _SCAN_ROWS] != 0, axis=1)) + a
                 for a in range(0, rows, _SCAN_ROWS)]
        return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)
    flat = state.reshape(-1)
    per_page = mmap.PAGESIZE // state.itemsize
    pages = offsets // mmap.PAGESIZE   # the mapping starts on a page: whole pages of the table
    whole = flat.size // per_page
    by_page = flat[:whole * per_page].reshape(whole, per_page)
    step = 512                         # pages (2 MiB) copied at a time into one reused buffer
    buffer = np.empty((step, per_page), state.dtype)
    found = []
    for a in range(0, len(pages), step):
        chunk = pages[a:a + step]
        inside = chunk[chunk < whole]
        copied = buffer[:len(inside)]
        np.take(by_page, inside, axis=0, out=copied)
        page_at, column = np.nonzero(copied != 0)
        hit = inside[page_at] * per_page + column
        tail = chunk[chunk >= whole]
        if tail.size:   # the last, partial page
            rest = np.arange(whole * per_page, flat.size)
            hit = np.concatenate([hit, rest[flat[rest] != 0]])
        row = hit // slots   # increasing within a page: a row's values are neighbours
        if row.size:
            found.append(row[np.concatenate(([True], row[1:] != row[:-1]))])
    return unique_sorted(np.concatenate(found)) if found else np.zeros(0, np.int64)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """np.unique of an integer array, without NumPy's np.unique (which imports numpy.ma,
    ~22 ms that a train run otherwise never pays: tests/test_startup.py)."""
    values = np.sort(values)
    if values.size:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


def first_arrivals(values: np.ndarray) -> np.ndarray:
    """The distinct values of a non-negative integer array (below 2^31), in the order of their
    first occurrence. Sorts the words value * 2^32 + position (distinct, so any sort gives the
    one order; NumPy's default sort of int64 is its vectorised one) and keeps each value's
    first position: ~5x faster than a stable argsort of the values (the first chunk of a run,
    where every feature is new: ~30 ms of the text generator's 2 MiB chunk)."""
    keys = (values.astype(np.int64) << 32) | np.arange(len(values), dtype=np.int64)
    keys.sort()
    heads = keys >> 32
    first = np.empty(len(keys), np.bool_)
    first[:1] = True
    np.not_equal(heads[1:], heads[:-1], out=first[1:])
    positions = keys[first] & 0xFFFFFFFF
    positions.sort()
    return values[positions]


def reserve(rows: int, slots: int):
    """Address space for the most rows a pool can hold (every hashed index's group: row_pool.RowPool),
    as ``zeroed_state`` maps it (its pages cost memory only once written), or None where
    that mapping is not made (not Linux, a small table, an address space too small): the
    pool then grows by copying. Growing within it copies nothing, so the pages a pool
    fills are written once (on this 2-core VM a first write costs ~1.3 ms per MB).

    The mapping asks for transparent huge pages (MADV_HUGEPAGE; machines often default
    to "madvise": huge pages only where asked). The pool fills its rows in order from
    the start, so a 2 MiB page costs at most the 2 MiB past the last row handed out,
    while a kernel's first writes to an example's fresh rows take one fault per 2 MiB
    instead of one per 4 KiB, in the middle of its loop
    (benchmarks/results/huge_pages_s45.md). The index stays on small pages: it is
    written at random, one entry per feature."""
    if not _mapped_size(rows * slots * 8):
        return None
    try:
        state = zeroed_state(rows, slots)
    except (OSError, ValueError, OverflowError, MemoryError):
        return None
    mapping = _root(state)
    if isinstance(mapping, _ZeroedMapping) and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE)
        except OSError:   # a kernel without transparent huge pages: small pages, as without the advice
            pass
    return state
