"""One read-only copy of a model's table for all of ``olcli serve --workers N``'s processes.

Each worker reads and checks the model file itself (model.decode); only the table
is shared. The first worker to load a file puts its table into a memory file
(Linux ``memfd_create``: shared memory with no path), whose pages are written once;
every worker then maps that file copy-on-write (MAP_PRIVATE), so the table's pages
are in memory once for the whole server instead of once per worker. The workers find
the memory file through a small entry in a folder of the supervisor's
(olcli/serve_ports.py ``table_folder(group)``: ``<tmp>/olcli-tables-<uid>-<supervisor pid>``,
removed by the supervisor at stop): the creator's
pid, the descriptor number and the file's inode, opened as
``/proc/<pid>/fd/<fd>``. The entry is named by the model file's SHA-256 (its last 32
bytes), so a reloaded model gets its own table and a worker never maps a table of
another file. An entry whose creator died or closed it is found stale (the open
fails or the inode differs) and is replaced.

The workers only read it (serve with --workers is prediction-only): a write would
copy the page into the writer alone, never change another worker's model. The
mapping is writable for the kernels' sake (Numba types a read-only array apart, so
it would compile, or miss among the ahead-of-time kernels, a second version of
every serving kernel). Where this cannot be done (no memfd, no /proc),
``shared_pool`` returns None and the worker keeps a private table.
"""

import mmap
import os

import numpy as np

from olcli.serve_ports import table_folder

_HELD = {}   # entry name -> (descriptor, inode) of the memory files this process created


class SharedTable(mmap.mmap):
    """A copy-on-write mapping of a shared table (a RowPool's index, keys and state)."""


def _layout(block_rows: int, group: int, slots: int, groups: int) -> tuple:
    """Byte offsets of the pool's index, keys and state in the memory file, and its size."""
    keys_at = (block_rows * 4 + 7) // 8 * 8
    state_at = keys_at + groups * 8
    return keys_at, state_at, state_at + groups * group * slots * 8


def _views(buffer, block_rows: int, group: int, slots: int, groups: int) -> tuple:
    keys_at, state_at, _ = _layout(block_rows, group, slots, groups)
    index = np.frombuffer(buffer, np.int32, block_rows, 0)
    keys = np.frombuffer(buffer, np.int64, groups, keys_at)
    state = np.frombuffer(buffer, np.float64, groups * group * slots, state_at).reshape(groups * group, slots)
    return index, keys, state


def shared_pool(key: bytes, group: int, block_rows: int, classes: int, slots: int, given: np.ndarray,
                values: np.ndarray, split: int = 1):
    """The model's row pool (olcli/row_pool.py RowPool) holding ``values`` at logical rows
    ``given``, its index, keys and state mapped from the memory file shared by ``group``'s
    workers; None if that cannot be done here. ``split``: the pool's layout (model.pool_split);
    the memory file holds the state as laid out, so every worker reads it with the same split
    (the file's checksum names the entry, and the split follows from the file)."""
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        return None
    from olcli.row_pool import RowPool
    from olcli.state import unique_sorted

    features = unique_sorted(np.asarray(given, np.int64) % block_rows)
    groups = len(features) + 1
    nbytes = _layout(block_rows, classes, slots, groups)[2]
    name = key.hex()[:32]
    where = table_folder(group)
    fill = (block_rows, classes, slots, groups, given, values, features, split)
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        descriptor = _open_entry(os.path.join(where, name), nbytes)
        if descriptor is None:
            descriptor = _create(where, name, nbytes, fill)
        try:
            mapping = SharedTable(descriptor, nbytes, flags=mmap.MAP_PRIVATE)
        finally:
            if name not in _HELD or _HELD[name][0] != descriptor:
                os.close(descriptor)
    except OSError:
        return None
    for old in [old for old in _HELD if old != name]:   # older tables: their pages go with their last mapping
        os.close(_HELD.pop(old)[0])
    index, keys, state = _views(mapping, block_rows, classes, slots, groups)
    index[keys[1:]].sum()   # map every page the model uses now (shared pages: read faults, no copies)
    state.sum()
    return RowPool.on(block_rows, classes, slots, index, keys, state, split=split)


def _open_entry(entry: str, nbytes: int):
    """The descriptor of the memory file an entry names, or None (no entry, or stale)."""
    try:
        with open(entry) as source:
            pid, fd, inode = (int(word) for word in source.read().split())
        descriptor = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    facts = os.fstat(descriptor)
    if facts.st_ino != inode or facts.st_size != nbytes:
        os.close(descriptor)
        return None
    return descriptor


def _create(where: str, name: str, nbytes: int, fill: tuple) -> int:
    """A memory file holding the table, its entry published; another worker's entry if it
    published first (both were filling: this one is dropped). The creator keeps the
    descriptor open (other workers open it through /proc) and closes those of older tables."""
    descriptor = os.memfd_create("olcli-table", os.MFD_CLOEXEC)
    try:
        os.ftruncate(descriptor, nbytes)
        with mmap.mmap(descriptor, nbytes, flags=mmap.MAP_SHARED) as writable:
            from olcli.row_pool import RowPool

            block_rows, classes, slots, groups, given, values, features, split = fill
            pool = RowPool.on(block_rows, classes, slots, *_views(writable, block_rows, classes, slots, groups),
                              split=split)
            pool.fill(given, values, features)
            del pool
        inode = os.fstat(descriptor).st_ino
        entry = os.path.join(where, name)
        draft = f"{entry}.{os.getpid()}"
        with open(draft, "w") as out:
            out.write(f"{os.getpid()} {descriptor} {inode}\n")
        try:
            os.link(draft, entry)
        except FileExistsError:
            theirs = _open_entry(entry, nbytes)
            if theirs is not None:
                os.close(descriptor)
                return theirs
            os.replace(draft, entry)   # a stale entry: ours instead
        finally:
            if os.path.exists(draft):
                os.unlink(draft)
    except BaseException:
        os.close(descriptor)
        raise
    _HELD[name] = (descriptor, inode)
    return descriptor
