"""How much memory the machine has for a new table (Linux /proc/meminfo)."""

import os


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
