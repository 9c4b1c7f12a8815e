"""olcli against Vowpal Wabbit on the same files, in the same run.

    pip install ".[bench]" && python benchmarks/bench_vs_vw.py [--runs 3] [--data DIR]

Files: a generated 1M-line click log (olcli/datagen.py's click, fixed seed; also a
4M-line one to show that memory does not grow with the input), ../shared/data/sst2/train.vw
(text) and ../shared/data/a9a/train.vw. For each file olcli (default algorithm, logistic
loss, -b 18) and VW (`python -m vowpalwabbit`, logistic loss, -b 18) run alternately after one
warm-up run each (warm numba cache); the table gives medians with min-max of wall seconds,
examples/s, features/s, peak RSS of the process, the progressive loss, and olcli/VW ratios.
Other olcli algorithms are timed on the click log too. The cold first run (empty numba
cache) is reported separately.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from setup_data import click_log, parse_arguments, require, shared_file  # noqa: E402


def _memory_mb(pid):
    """(peak resident memory, current private memory) of a process, from
    /proc/PID/status: VmHWM is the process's own high-water mark (not ru_maxrss: on
    Linux a child inherits its parent's through fork and exec); RssAnon leaves out
    file-backed pages such as shared-library code (LLVM is ~60 MB of it)."""
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":")[0]
                if key in ("VmHWM", "RssAnon"):
                    values[key] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return values.get("VmHWM", 0.0), values.get("RssAnon", 0.0)


def measure(command, env=None):
    """(wall seconds, peak RSS MB, peak private MB, stdout+stderr) of one process;
    memory is sampled every 5 ms (the high-water mark only grows, so at most the
    last few ms are missed; the private peak is the largest sample)."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        peak = private = 0.0
        while process.poll() is None:
            high_water, anonymous = _memory_mb(process.pid)
            peak, private = max(peak, high_water), max(private, anonymous)
            time.sleep(0.005)
        wall = time.perf_counter() - started
        out.seek(0)
        output = out.read().decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{output[-2000:]}")
    return wall, peak, private, output


def olcli_command(path, report, extra=()):
    return [sys.executable, "-m", "olcli", "train", path, "--loss", "logistic", "-b", "18", "--quiet",
            "--report", report, *extra]


def vw_command(path):
    return [sys.executable, "-m", "vowpalwabbit", "-d", path, "--loss_function", "logistic", "-b", "18"]


def run_olcli(path, tmp, extra=(), env=None):
    report = os.path.join(tmp, "report.json")
    wall, rss, private, _ = measure(olcli_command(path, report, extra), env)
    r = json.load(open(report))
    return wall, rss, r["average_loss"], r["examples"], r["total_features"], private


def run_vw(path):
    wall, rss, private, out = measure(vw_command(path))
    loss = float(re.search(r"average loss = ([0-9.]+)", out).group(1))
    examples = int(re.search(r"number of examples = (\d+)", out).group(1))
    features = int(re.search(r"total feature number = (\d+)", out).group(1))
    return wall, rss, loss, examples, features, private


def summary(values):
    return statistics.median(values), min(values), max(values)


def fmt(stat, digits=2):
    median, low, high = stat
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def main():
    args = parse_arguments(__doc__.splitlines()[0])
    clicks, clicks4 = click_log(args, 1_000_000), click_log(args, 4_000_000)
    files = [("click log 1M", clicks), ("click log 4M", clicks4),
             ("sst2 (text)", shared_file(args, "sst2")), ("a9a", shared_file(args, "a9a"))]
    require(files)

    with tempfile.TemporaryDirectory() as tmp:
        cold_env = {**os.environ, "NUMBA_CACHE_DIR": os.path.join(tmp, "cold-cache")}
        cold = run_olcli(clicks, tmp, env=cold_env)
        warm = run_olcli(clicks, tmp, env=cold_env)
        print(f"cold first run (empty numba cache), click log 1M: {cold[0]:.2f} s; the same run warm: "
              f"{warm[0]:.2f} s; compilation about {cold[0] - warm[0]:.1f} s")
        one_line = os.path.join(tmp, "one.vw")
        with open(one_line, "w") as f:
            f.write("1 |a x:1 y:2\n")
        run_olcli(one_line, tmp)  # warm-up: the default cache may not hold these kernels yet
        floor = run_olcli(one_line, tmp)
        print(f"a one-line file (start-up and memory floor): olcli {floor[0]:.2f} s, peak RSS {floor[1]:.0f} MB "
              f"({floor[5]:.0f} MB private)\n")

        print("| file | tool | wall s, median (min-max) | examples/s | features/s | peak RSS MB "
              "| of it private MB | progressive loss |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        ratios = []
        for label, path in files:
            run_olcli(path, tmp)
            run_vw(path)  # warm-up
            results = {"olcli": [], "VW": []}
            for _ in range(args.runs):
                results["olcli"].append(run_olcli(path, tmp))
                results["VW"].append(run_vw(path))
            walls = {}
            for tool, runs in results.items():
                wall = summary([r[0] for r in runs])
                rss = summary([r[1] for r in runs])
                private = summary([r[5] for r in runs])
                examples, features, loss = runs[0][3], runs[0][4], runs[0][2]
                walls[tool] = (wall, rss)
                print(f"| {label} | {tool} | {fmt(wall)} | {examples / wall[0]:,.0f} | {features / wall[0]:,.0f} | "
                      f"{rss[0]:.0f} | {private[0]:.0f} | {loss:.4f} |", flush=True)
            ratios.append((label, walls["olcli"][0][0] / walls["VW"][0][0], walls["olcli"][1][0] / walls["VW"][1][0]))
        print("\n| file | wall-time ratio olcli/VW | peak-RSS ratio olcli/VW |")
        print("|---|---:|---:|")
        for label, wall_ratio, rss_ratio in ratios:
            print(f"| {label} | {wall_ratio:.2f} | {rss_ratio:.2f} |")

        print("\nOther olcli algorithms, click log 1M (median wall s of the runs, progressive loss):\n")
        print("| algorithm | wall s | progressive loss |")
        print("|---|---:|---:|")
        for algorithm in ("adagrad", "adagrad-dual", "ftrl", "scinol1", "scinol2", "sgd"):
            run_olcli(clicks, tmp, [f"--{algorithm}"])
            runs = [run_olcli(clicks, tmp, [f"--{algorithm}"]) for _ in range(args.runs)]
            print(f"| {algorithm} | {fmt(summary([r[0] for r in runs]))} | {runs[0][2]:.4f} |", flush=True)


if __name__ == "__main__":
    main()
