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
    """Refuse a run that cannot start. The table is mapped without reserving memory
    (model.zeroed_state): it costs the pages its examples touch, not 2^bits rows x
    slots, so what is judged here is what the run touches before its first example
    (MEMORY_FLOOR) and the table's address space; MemoryGuard watches the rest.
    ``copies`` is accepted for the callers' sake (a kept best pass now copies only
    its touched rows)."""
    rows = max(1, classes) * table_rows(bits)
    available = available_memory()
    gib = 1 << 30
    if available is not None and available < MEMORY_FLOOR:
        raise UsageError(f"only {available / gib:.2f} GiB of memory is available; a run needs at least "
                         f"{MEMORY_FLOOR / gib:.2f} GiB besides the rows of -b {bits}'s table it touches")
    table = rows * n_slots * 8
    total = meminfo("MemTotal")
    limit = TABLE_SPACE_FACTOR * total if total else 1 << 46
    if table > limit:
        raise UsageError(f"-b {bits}{f' with {classes} classes' if classes else ''} is a table of {rows:,} rows x "
                         f"{n_slots} slots ({table / gib:,.0f} GiB of address space), more than "
                         f"{TABLE_SPACE_FACTOR} x this machine's {total / gib:.0f} GiB of memory that olcli maps: "
                         "use a smaller -b")


# A table may span at most this many times the machine's memory: its untouched pages cost
# nothing, but every save walks its page map (about 0.15 s per 26 GiB) and a touched page
# costs a page-table entry besides its 4 KiB.
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
