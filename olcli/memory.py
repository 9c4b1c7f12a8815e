"""How much memory the machine has for a new table (Linux /proc/meminfo)."""

import os


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), if known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
