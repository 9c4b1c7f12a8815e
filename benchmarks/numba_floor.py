"""What any process that runs a cached Numba kernel costs: the floor below olcli (issue 16).

    python benchmarks/numba_floor.py [--runs 15] [--out FILE]

Issue 16 measures olcli's start-up and memory against "the Numba floor", ``python -c
"import numba, numpy"``. That process never runs a kernel. This script measures, side by
side in one run (the cases interleaved, rotating which goes first), what a process pays that
does run one:

- ``python -c pass``: the interpreter;
- ``import numba, numpy``: the floor as issue 16 states it;
- ``+ one cached kernel``: the same, then a five-line ``@njit(cache=True)`` function (a sum
  over a float64 array) loaded from a warm on-disk cache and called once;
- ``+ one kernel compiled``: the same function with an empty cache (compiled in the run).

Each gives wall seconds, CPU seconds (user + system, from wait4) and peak RSS (ru_maxrss,
the process's own high-water mark). Medians (min-max). Writes
``benchmarks/results/numba_floor.md`` (or --out) and prints it.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable

KERNEL = '''
import numba
@numba.njit(cache=True, nogil=True)
def total(a):
    s = 0.0
    for x in a:
        s += x
    return s
'''


def measure(command, env):
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    error = process.stderr.read()
    process.stderr.close()
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed: {error.decode(errors='replace')[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def load():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "numba_floor.md"))
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="olcli-floor-")
    with open(os.path.join(work, "kernel_module.py"), "w") as f:
        f.write(KERNEL)
    warm_cache, cold_cache = os.path.join(work, "warm"), os.path.join(work, "cold")
    call = "import numpy, kernel_module; kernel_module.total(numpy.ones(3))"
    base = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    base["PYTHONPATH"] = work
    warm_env = {**base, "NUMBA_CACHE_DIR": warm_cache}
    cold_env = {**base, "NUMBA_CACHE_DIR": cold_cache}
    measure([PY, "-c", call], warm_env)  # fills the warm cache

    def cold_case():
        shutil.rmtree(cold_cache, ignore_errors=True)
        return measure([PY, "-c", call], cold_env)

    cases = [
        ("python -c pass", lambda: measure([PY, "-c", "pass"], base)),
        ('python -c "import numba, numpy" (issue 16\'s floor)', lambda: measure([PY, "-c", "import numba, numpy"], base)),
        ("+ one cached kernel loaded and called", lambda: measure([PY, "-c", call], warm_env)),
        ("+ the same kernel compiled (empty cache)", cold_case),
    ]
    samples = {name: [] for name, _ in cases}
    loads = [load()]
    for k in range(args.runs):
        order = cases[k % len(cases):] + cases[:k % len(cases)]
        for name, run in order:
            samples[name].append(run())
    loads.append(load())
    shutil.rmtree(work, ignore_errors=True)

    def cell(values, digits):
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    floor_name = cases[1][0]
    floor_wall = statistics.median(s[0] for s in samples[floor_name])
    floor_rss = statistics.median(s[2] for s in samples[floor_name])
    lines = [
        "# The floor of a process that runs a cached Numba kernel",
        "",
        f"`python benchmarks/numba_floor.py --runs {args.runs}`; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Machine: {os.cpu_count()} cores; "
        f"Python {sys.version.split()[0]}; load average (1 min) at the start {loads[0]:.1f}, at the end {loads[1]:.1f}. "
        "Cases interleaved, rotating which goes first; medians (min-max).",
        "",
        "| process | wall s | CPU s | peak RSS MB | wall / floor | RSS - floor MB |",
        "|---|---|---|---|---:|---:|",
    ]
    for name, _ in cases:
        runs = samples[name]
        wall = statistics.median(s[0] for s in runs)
        rss = statistics.median(s[2] for s in runs)
        lines.append(f"| {name} | {cell([s[0] for s in runs], 3)} | {cell([s[1] for s in runs], 3)} | "
                     f"{cell([s[2] for s in runs], 1)} | {wall / floor_wall:.2f} | {rss - floor_rss:+.1f} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
