"""Start-up against VW and the Python + NumPy floor (issue 25), side by side in one run.

    python benchmarks/startup_vs_vw.py [--runs 7] [--files 100] [--lines 2000] [--out NAME]

Cases, each a process started as a user starts it (``/work/venv``'s interpreter):

- floor: ``python -c "import numpy"``;
- VW: ``python -m vowpalwabbit -d FILE --quiet`` (vowpalwabbit 9.11.9, its default learner);
- olcli AOT: ``olcli train FILE --quiet`` with ``OLCLI_KERNELS=aot`` (the kernels compiled
  ahead of time, olcli/aot; the run must not import Numba: checked with ``-X importtime``);
- olcli JIT: the same with ``OLCLI_KERNELS=jit`` (Numba's JIT, warm on-disk cache);
- first run after install: both olcli modes with an empty Numba cache (``NUMBA_CACHE_DIR`` a
  new folder): what a fresh install's first command costs (the JIT compiles, AOT must not).

FILE is the first ``--lines`` lines of a9a (``/work/shared/data/a9a/train.vw``). The
small-file loop: ``--files`` files of ``--lines`` lines (consecutive slices of a9a's
train and test sets), one process each, run one after the other, for VW and both olcli
modes, the loops interleaved. Wall seconds, CPU seconds and peak RSS (ru_maxrss) from
wait4; medians (min-max) over ``--runs``, cases interleaved with a rotating first.
Writes benchmarks/results/``--out``.md and .json. The processes run without
PYTHONDONTWRITEBYTECODE (``env_with``): Python modules load from .pyc files, as installed.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PY = sys.executable
OLCLI = [PY, "-m", "olcli"]
A9A = "/work/shared/data/a9a"


def measure(command, env=None) -> dict:
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.stderr.close()
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed ({status}): {error.decode(errors='replace')[-800:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "stderr": error.decode(errors="replace")}


def env_with(**changes) -> dict:
    """The environment of a user's process: PYTHONDONTWRITEBYTECODE (set in this machine's
    sessions) is dropped, so that olcli's modules load from their .pyc files as in an
    installed copy (pip writes them) instead of being compiled from source on every run."""
    env = dict(os.environ)
    env.pop("OLCLI_KERNELS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


def slices(folder: str, files: int, lines: int) -> list:
    """``files`` files of ``lines`` lines each, from a9a's train then test set."""
    source = []
    for name in ("train.vw", "test.vw"):
        with open(os.path.join(A9A, name), "rb") as f:
            source.extend(f.readlines())
    paths = []
    for k in range(files):
        chunk = source[(k * lines) % max(1, len(source) - lines):][:lines]
        path = os.path.join(folder, f"part{k:03d}.vw")
        with open(path, "wb") as f:
            f.writelines(chunk)
        paths.append(path)
    return paths


def imports_numba(path: str) -> bool:
    probe = subprocess.run([PY, "-X", "importtime", "-m", "olcli", "train", path, "--quiet"],
                           env=env_with(OLCLI_KERNELS="aot"), capture_output=True, text=True)
    return any(line.rstrip().endswith("| numba") or line.rstrip().endswith("|   numba")
               for line in probe.stderr.splitlines())


def summary(values) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--loop-runs", type=int, default=1)
    parser.add_argument("--out", default="startup_vs_vw")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="startup-vs-vw-")
    try:
        paths = slices(folder, max(1, args.files), args.lines)
        first = paths[0]
        cases = {
            "python -c \"import numpy\" (floor)": ([PY, "-c", "import numpy"], env_with()),
            "VW (python -m vowpalwabbit)": ([PY, "-m", "vowpalwabbit", "-d", first, "--quiet"], env_with()),
            "olcli AOT (OLCLI_KERNELS=aot)": (OLCLI + ["train", first, "--quiet"], env_with(OLCLI_KERNELS="aot")),
            "olcli JIT (OLCLI_KERNELS=jit, warm cache)": (OLCLI + ["train", first, "--quiet"],
                                                          env_with(OLCLI_KERNELS="jit")),
        }
        for command, env in cases.values():  # warm the file cache (and the JIT's kernel cache)
            measure(command, env)
        started_load = os.getloadavg()[0]
        results = {name: [] for name in cases}
        names = list(cases)
        for run in range(args.runs):
            order = names[run % len(names):] + names[:run % len(names)]
            for name in order:
                results[name].append(measure(*cases[name]))

        first_runs = {}
        for mode in ("aot", "jit"):
            cache = tempfile.mkdtemp(prefix="empty-numba-cache-", dir=folder)
            env = env_with(OLCLI_KERNELS=mode, NUMBA_CACHE_DIR=cache)
            one = measure(OLCLI + ["train", first, "--quiet"], env)
            two = measure(OLCLI + ["train", first, "--quiet"], env)
            first_runs[mode] = {"first": one, "second": two,
                                "compiled notice": "compiling" in one["stderr"]}

        loops = {"VW": [], "olcli AOT": [], "olcli JIT": []}
        loop_commands = {
            "VW": (lambda p: [PY, "-m", "vowpalwabbit", "-d", p, "--quiet"], env_with()),
            "olcli AOT": (lambda p: OLCLI + ["train", p, "--quiet"], env_with(OLCLI_KERNELS="aot")),
            "olcli JIT": (lambda p: OLCLI + ["train", p, "--quiet"], env_with(OLCLI_KERNELS="jit")),
        }
        for run in range(args.loop_runs):
            for name in (list(loops)[run % 3:] + list(loops)[:run % 3]):
                make, env = loop_commands[name]
                started = time.perf_counter()
                cpu = 0.0
                for path in paths:
                    cpu += measure(make(path), env)["cpu"]
                loops[name].append({"wall": time.perf_counter() - started, "cpu": cpu})
        ended_load = os.getloadavg()[0]
        numba_in_aot = imports_numba(first)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    floor = statistics.median(r["wall"] for r in results[names[0]])
    vw_wall = statistics.median(r["wall"] for r in results[names[1]])
    vw_rss = statistics.median(r["rss"] for r in results[names[1]])
    lines = [f"# Start-up against VW and the Python + NumPy floor (issue 25)", "",
             f"`python benchmarks/startup_vs_vw.py --runs {args.runs} --files {args.files} --lines {args.lines}`; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Machine: {os.cpu_count()} cores, shared; "
             f"load average (1 min) {started_load:.1f} at the start, {ended_load:.1f} at the end. "
             f"Python {sys.version.split()[0]}. Medians (min-max) of {args.runs} interleaved runs.", "",
             f"## {args.lines} lines of a9a, default learner (olcli train FILE --quiet; VW -d FILE --quiet)", "",
             "| process | wall s | CPU s | peak RSS MB | wall / VW | wall / floor | RSS / VW |",
             "|---|---|---|---|---:|---:|---:|"]
    for name in names:
        rows = results[name]
        wall = statistics.median(r["wall"] for r in rows)
        rss = statistics.median(r["rss"] for r in rows)
        lines.append(f"| {name} | {summary([r['wall'] for r in rows])} | {summary([r['cpu'] for r in rows])} | "
                     f"{summary([r['rss'] for r in rows])} | {wall / vw_wall:.2f} | {wall / floor:.2f} | "
                     f"{rss / vw_rss:.2f} |")
    lines += ["", f"The AOT run imports Numba: {'yes' if numba_in_aot else 'no'} (`-X importtime`).", "",
              "## First run after install (empty Numba cache), then the second run", "",
              "| olcli mode | first run wall s | second run wall s | first / second | compile notice on stderr |",
              "|---|---|---|---:|---|"]
    for mode, row in first_runs.items():
        lines.append(f"| {mode} | {row['first']['wall']:.3f} | {row['second']['wall']:.3f} | "
                     f"{row['first']['wall'] / row['second']['wall']:.2f} | "
                     f"{'yes' if row['compiled notice'] else 'no'} |")
    vw_loop = statistics.median(r["wall"] for r in loops["VW"])
    lines += ["", f"## Small-file loop: {args.files} files of {args.lines} lines, one process each", "",
              "| tool | total wall s | total CPU s | wall / VW |", "|---|---|---|---:|"]
    for name, rows in loops.items():
        wall = statistics.median(r["wall"] for r in rows)
        lines.append(f"| {name} | {summary([r['wall'] for r in rows])} | {summary([r['cpu'] for r in rows])} | "
                     f"{wall / vw_loop:.2f} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, args.out + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(RESULTS, args.out + ".json"), "w") as f:
        json.dump({"args": vars(args), "cases": {k: [{m: v for m, v in r.items() if m != "stderr"} for r in rows]
                                                 for k, rows in results.items()},
                   "first_runs": {k: {"first": v["first"]["wall"], "second": v["second"]["wall"],
                                      "notice": v["compiled notice"]} for k, v in first_runs.items()},
                   "loops": loops, "aot_imports_numba": numba_in_aot}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
