"""What any process that runs a cached Numba kernel costs: the floor below olcli (issue 16).

    python -m benchmarks.numba_floor [--runs 15] [--out NAME]

Issue 16 measures olcli's start-up and memory against "the Numba floor", ``python -c
"import numba, numpy"``. That process never runs a kernel. This script measures, side by
side in one run (the cases interleaved, rotating which goes first), what a process pays that
does run one:

- ``python -c pass``: the interpreter;
- ``import numba, numpy``: the floor as issue 16 states it;
- ``+ one cached kernel``: the same, then a five-line ``@njit(cache=True)`` function (a sum
  over a float64 array) loaded from a warm on-disk cache and called once;
- ``+ one kernel compiled``: the same function with an empty cache (compiled in the run).

Each is measured by ``benchmarks.harness.measure``: wall seconds, CPU seconds (user + system,
from wait4) and peak RSS (the process's own high-water mark). Medians (min-max). Writes
``benchmarks/results/numba_floor.md`` (or ``--out``.md) and prints it.
"""

import argparse
import os
import shutil
import tempfile

from benchmarks import harness
from benchmarks.harness import PY

KERNEL = '''
import numba
@numba.njit(cache=True, nogil=True)
def total(a):
    s = 0.0
    for x in a:
        s += x
    return s
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", default="numba_floor")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="olcli-floor-")
    with open(os.path.join(work, "kernel_module.py"), "w") as f:
        f.write(KERNEL)
    warm_cache, cold_cache = os.path.join(work, "warm"), os.path.join(work, "cold")
    call = "import numpy, kernel_module; kernel_module.total(numpy.ones(3))"
    base = harness.python_env(NUMBA_CACHE_DIR=None, PYTHONPATH=work)
    warm_env = {**base, "NUMBA_CACHE_DIR": warm_cache}
    cold_env = {**base, "NUMBA_CACHE_DIR": cold_cache}
    harness.measure([PY, "-c", call], env=warm_env)  # fills the warm cache

    def cold_case():
        shutil.rmtree(cold_cache, ignore_errors=True)
        return harness.measure([PY, "-c", call], env=cold_env)

    cases = {
        "python -c pass": lambda: harness.measure([PY, "-c", "pass"], env=base),
        'python -c "import numba, numpy" (issue 16\'s floor)':
            lambda: harness.measure([*harness.NUMBA_FLOOR], env=base),
        "+ one cached kernel loaded and called": lambda: harness.measure([PY, "-c", call], env=warm_env),
        "+ the same kernel compiled (empty cache)": cold_case,
    }
    results = harness.Results(args.out, "The floor of a process that runs a cached Numba kernel")
    try:
        samples = harness.interleaved(cases, args.runs, warm_up=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    floor_name = list(cases)[1]
    floor_wall = harness.median_of(samples[floor_name], "wall")
    floor_rss = harness.median_of(samples[floor_name], "rss")
    results.say("Cases interleaved, rotating which goes first; medians (min-max).")
    results.say()
    rows = []
    for name, runs in samples.items():
        wall, rss = harness.median_of(runs, "wall"), harness.median_of(runs, "rss")
        rows.append([name, harness.fmt(harness.stats(r.wall for r in runs), 3),
                     harness.fmt(harness.stats(r.cpu for r in runs), 3),
                     harness.fmt(harness.stats(r.rss for r in runs), 1), f"{wall / floor_wall:.2f}",
                     f"{rss - floor_rss:+.1f}"])
    results.table(["process", "wall s", "CPU s", "peak RSS MB", "wall / floor", "RSS - floor MB"], rows, "llllrr")
    results.data = {name: [r.numbers() for r in runs] for name, runs in samples.items()}
    print(f"wrote {results.write()}")


if __name__ == "__main__":
    main()
