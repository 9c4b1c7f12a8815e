"""Memory: what the machine has (Linux /proc/meminfo), whether a run can start with
its table (``check_memory``), and the guard that stops a run before the machine runs out
(``MemoryGuard``)."""

import os
import time

from olcli.errors import OlcliError, UsageError
from olcli.state import table_rows


def meminfo(field: str) -> int | None:
    """Bytes of one /proc/meminfo field (``MemTotal``, ``MemAvailable``), if known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), if known."""
    available = meminfo("MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


# What a run needs besides the rows it touches (the interpreter, the compiled kernels,
# the parser's buffers): a run starts only with this much available, and is stopped
# (what it learned written) when less than MEMORY_RESERVE is left (MemoryGuard).
MEMORY_FLOOR = 256 << 20
MEMORY_RESERVE = 512 << 20


def check_memory(bits: int, n_slots: int, classes: int, copies: int = 1) -> None:
    """Refuse a run that cannot start. The table holds a row per touched feature
    (row_pool.RowPool): what it costs grows with the features the examples bring, not with
    2^bits x slots, and MemoryGuard watches it. What is judged here is what the run needs
    before its first example (MEMORY_FLOOR) and the table's index, 4 bytes for each of
    2^bits + 1 hashed indices, allocated zeroed (its pages cost memory once an example
    reaches them), which may span at most TABLE_SPACE_FACTOR x the machine's memory; and
    the table's rows (classes x (2^bits + 1)), which the model file numbers in 32 bits.
    ``n_slots`` and ``copies`` are accepted for the callers' sake (the rows they multiply
    are the touched ones)."""
    available = available_memory()
    gib = 1 << 30
    if available is not None and available < MEMORY_FLOOR:
        raise UsageError(f"only {available / gib:.2f} GiB of memory is available; a run needs at least "
                         f"{MEMORY_FLOOR / gib:.2f} GiB besides the rows of -b {bits}'s table it touches")
    rows = max(1, classes) * table_rows(bits)
    if rows > 1 << 32:
        raise UsageError(f"-b {bits}{f' with {classes} classes' if classes else ''} is a table of {rows:,} rows, more "
                         "than the model file's 32-bit row numbers hold (4,294,967,296): use a smaller -b")
    index = table_rows(bits) * 4
    total = meminfo("MemTotal")
    limit = TABLE_SPACE_FACTOR * total if total else 1 << 46
    if index > limit:
        raise UsageError(f"-b {bits}'s table index is {table_rows(bits):,} entries ({index / gib:,.0f} GiB of "
                         f"address space), more than {TABLE_SPACE_FACTOR} x this machine's {total / gib:.0f} GiB "
                         "of memory that olcli maps: use a smaller -b")


# The table's index may span at most this many times the machine's memory: its untouched
# pages cost nothing, but a touched page costs a page-table entry besides its 4 KiB.
TABLE_SPACE_FACTOR = 16


class MemoryGuard:
    """Stops a run before the machine runs out of memory: ``check()`` (after each
    kernel call; it reads /proc/meminfo at most every ``every`` seconds) raises
    OlcliError when less than ``reserve`` bytes are available, so that the run ends
    the way an interrupted one does, with what it learned written (saving needs
    memory for the touched rows only, which the reserve leaves)."""

    def __init__(self, reserve: int = MEMORY_RESERVE, every: float = 0.05):
        self.reserve, self.every, self._next = reserve, every, 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        available = available_memory()
        if available is not None and available < self.reserve:
            raise OlcliError(f"out of memory: only {available / (1 << 20):.0f} MiB of memory is left (the "
                             f"rows this run touched, at {self.reserve >> 20} MiB kept in reserve); stopped "
                             "before the system would kill it: use a smaller -b, fewer interactions or "
                             "fewer classes")
