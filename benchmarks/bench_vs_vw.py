"""olcli against Vowpal Wabbit and the Numba floor, side by side in one run (issue 16).

    pip install ".[bench]" && python benchmarks/bench_vs_vw.py [--runs 5] [--data DIR] [--work DIR]
                                                              [--cases start-up,files,linear,compile,algorithms]

Cases, each measured in this one run, the tools alternating run by run:

- ``start-up``: the first 2,000 lines of ``a9a/train.vw``: ``olcli train`` (default algorithm,
  ``--loss logistic -b 18``), VW (``python -m vowpalwabbit``, the pip package's CLI, same
  options), and the floors: the Numba floor ``python -c "import numba, numpy"`` and Python
  itself (``python -c pass``). ``--runs`` x 3 rounds. Target (issue 16): olcli wall <= 1.3 x the
  Numba floor.
- ``files``: the generated click log (``python -m olcli.datagen click``, full size: 1M lines)
  and text (``python -m olcli.datagen text``, full size: 200k lines), ``a9a/train.vw`` and
  ``sst2/train.vw``: wall and CPU seconds, examples/s, features/s, peak RSS, progressive loss.
- ``linear``: the click log at 10x (10M lines) against 1M: time ratio (target <= 10.5) and peak
  RSS (target: the same, +-5%).
- ``compile``: an empty Numba cache: the first run of the start-up case (compiles what it
  needs; target <= 4 s to the first example, or zero after ``olcli warm``), ``olcli warm`` (every
  kernel of every algorithm) into another empty cache, and the same run with that cache.
- ``algorithms``: every other algorithm on the click log 1M.

Each measurement gives wall seconds, CPU seconds (user + system of the process and all its
threads, from wait4), peak RSS (``VmHWM``, sampled every 5 ms; the process's own high-water
mark) and the load average while it ran: the machine is shared, so CPU seconds are the
steadier number. Medians (min-max) of the runs. Results: the tables on stdout and in
``benchmarks/results/bench_vs_vw.md``, the raw numbers in ``benchmarks/results/bench_vs_vw.json``
(``bench_vs_vw-CASES.md/.json`` when only some cases ran).
"""

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from setup_data import click_log, generated, parse_arguments, require, shared_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PY = sys.executable
CASES = ("start-up", "files", "linear", "compile", "algorithms")


def _peak_rss_mb(pid) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def measure(command, env=None, cwd=None) -> dict:
    """One process: wall and CPU seconds, peak RSS (MB), load average, its output.
    Python may write bytecode (PYTHONDONTWRITEBYTECODE is dropped): an installed olcli
    has its .pyc files, and a checkout without them would compile its modules at every
    start (0.15 s)."""
    env = {key: value for key, value in (os.environ if env is None else env).items()
           if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryFile() as out:
        load = os.getloadavg()[0]
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = [0.0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], _peak_rss_mb(process.pid))
                done.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": peak[0],
            "load": (load + os.getloadavg()[0]) / 2, "output": output}


def olcli_command(path, report, extra=()):
    return [PY, "-m", "olcli", "train", path, "--loss", "logistic", "-b", "18", "--quiet", "--report", report,
            *extra]


def vw_command(path):
    return [PY, "-m", "vowpalwabbit", "-d", path, "--loss_function", "logistic", "-b", "18"]


def run_olcli(path, tmp, extra=(), env=None) -> dict:
    report = os.path.join(tmp, "report.json")
    result = measure(olcli_command(path, report, extra), env)
    r = json.load(open(report))
    result.update(loss=r["average_loss"], examples=r["examples"], features=r["total_features"])
    return result


def run_vw(path) -> dict:
    result = measure(vw_command(path))
    out = result["output"]
    result.update(loss=float(re.search(r"average loss = ([0-9.]+)", out).group(1)),
                  examples=int(re.search(r"number of examples = (\d+)", out).group(1)),
                  features=int(re.search(r"total feature number = (\d+)", out).group(1)))
    return result


def stats(runs, key) -> tuple:
    values = [r[key] for r in runs]
    return statistics.median(values), min(values), max(values)


def fmt(stat, digits=2) -> str:
    median, low, high = stat
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


class Report:
    def __init__(self):
        self.lines, self.data = [], {}

    def say(self, text=""):
        print(text, flush=True)
        self.lines.append(text)


def _strip(runs):
    return [{k: v for k, v in r.items() if k != "output"} for r in runs]


def case_start_up(args, tmp, out: Report):
    lines = os.path.join(tmp, "a9a_2000.vw")
    with open(shared_file(args, "a9a"), "rb") as f, open(lines, "wb") as g:
        g.writelines(f.readline() for _ in range(2000))
    tools = {
        "olcli": lambda: run_olcli(lines, tmp),
        "VW": lambda: run_vw(lines),
        "Numba floor": lambda: measure([PY, "-c", "import numba, numpy"]),
        "Python": lambda: measure([PY, "-c", "pass"]),
    }
    for run in tools.values():
        run()  # warm-up: the kernel cache, the page cache
    runs = {name: [] for name in tools}
    for _ in range(args.runs * 3):
        for name, run in tools.items():
            runs[name].append(run())
    out.say("### Start-up: the first 2,000 lines of a9a (warm kernel cache)\n")
    out.say("| process | wall s, median (min-max) | CPU s | peak RSS MB | load avg |")
    out.say("|---|---:|---:|---:|---:|")
    for name, rs in runs.items():
        out.say(f"| {name} | {fmt(stats(rs, 'wall'), 3)} | {fmt(stats(rs, 'cpu'), 3)} | "
                f"{stats(rs, 'rss')[0]:.0f} | {stats(rs, 'load')[0]:.1f} |")
    wall = {name: stats(rs, "wall")[0] for name, rs in runs.items()}
    cpu = {name: stats(rs, "cpu")[0] for name, rs in runs.items()}
    # Paired ratios: each olcli run against the floor run right after it.
    paired = [o["wall"] / f["wall"] for o, f in zip(runs["olcli"], runs["Numba floor"])]
    out.say(f"\nolcli / Numba floor: wall {wall['olcli'] / wall['Numba floor']:.2f} (run by run: median "
            f"{statistics.median(paired):.2f}, {min(paired):.2f}-{max(paired):.2f}), CPU "
            f"{cpu['olcli'] / cpu['Numba floor']:.2f}; olcli / VW: wall {wall['olcli'] / wall['VW']:.2f}, "
            f"CPU {cpu['olcli'] / cpu['VW']:.2f}; olcli's own time above the floor: "
            f"{wall['olcli'] - wall['Numba floor']:.3f} s wall, {cpu['olcli'] - cpu['Numba floor']:.3f} s CPU. "
            f"Target: wall <= 1.3 x the floor.\n")
    out.data["start-up"] = {name: _strip(rs) for name, rs in runs.items()}
    return lines


def _compare(label, path, args, tmp, out: Report, runs=None):
    run_olcli(path, tmp)
    run_vw(path)  # warm-up
    results = {"olcli": [], "VW": []}
    for _ in range(runs or args.runs):
        results["olcli"].append(run_olcli(path, tmp))
        results["VW"].append(run_vw(path))
    for tool, rs in results.items():
        wall, cpu = stats(rs, "wall"), stats(rs, "cpu")
        examples, features, loss = rs[0]["examples"], rs[0]["features"], rs[0]["loss"]
        out.say(f"| {label} | {tool} | {fmt(wall)} | {fmt(cpu)} | {examples / wall[0]:,.0f} | "
                f"{features / wall[0]:,.0f} | {stats(rs, 'rss')[0]:.0f} | {loss:.4f} | {stats(rs, 'load')[0]:.1f} |")
    out.data.setdefault("files", {})[label] = {tool: _strip(rs) for tool, rs in results.items()}
    return {tool: (stats(rs, "wall")[0], stats(rs, "cpu")[0], stats(rs, "rss")[0]) for tool, rs in results.items()}


FILE_HEADER = ("| file | tool | wall s, median (min-max) | CPU s | examples/s (wall) | features/s (wall) | peak RSS MB "
               "| progressive loss | load avg |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")


def case_files(args, tmp, out: Report):
    files = [("click log 1M", click_log(args, 1_000_000)), ("text 200k", generated(args, "text")),
             ("a9a", shared_file(args, "a9a")), ("sst2 (text)", shared_file(args, "sst2"))]
    require(files)
    out.say("### Files: olcli (default algorithm) and VW, `--loss logistic -b 18`, one pass\n")
    out.say(FILE_HEADER)
    ratios = [(label, _compare(label, path, args, tmp, out)) for label, path in files]
    out.say("\n| file | wall olcli/VW | CPU olcli/VW | peak RSS olcli/VW |\n|---|---:|---:|---:|")
    for label, r in ratios:
        out.say(f"| {label} | {r['olcli'][0] / r['VW'][0]:.2f} | {r['olcli'][1] / r['VW'][1]:.2f} | "
                f"{r['olcli'][2] / r['VW'][2]:.2f} |")
    out.say()


def case_linear(args, tmp, out: Report):
    small, large = click_log(args, 1_000_000), click_log(args, 10_000_000)
    out.say("### Linear time, flat memory: the click log at 1M and 10M lines\n")
    out.say(FILE_HEADER)
    one = _compare("click log 1M", small, args, tmp, out)
    ten = _compare("click log 10M", large, args, tmp, out, runs=max(1, args.runs // 2))
    out.say("\n| tool | time 10M / 1M (wall) | CPU 10M / 1M | peak RSS 10M / 1M |\n|---|---:|---:|---:|")
    for tool in ("olcli", "VW"):
        out.say(f"| {tool} | {ten[tool][0] / one[tool][0]:.2f} | {ten[tool][1] / one[tool][1]:.2f} | "
                f"{ten[tool][2] / one[tool][2]:.3f} |")
    out.say("\nTargets: time <= 10.5 x, peak RSS the same (+-5%).\n")


def case_compile(args, tmp, out: Report, lines):
    cold = os.path.join(tmp, "cold-cache")
    warmed = os.path.join(tmp, "warmed-cache")
    env_cold = {**os.environ, "NUMBA_CACHE_DIR": cold}
    env_warmed = {**os.environ, "NUMBA_CACHE_DIR": warmed}
    first = run_olcli(lines, tmp, env=env_cold)
    second = run_olcli(lines, tmp, env=env_cold)
    warm = measure([PY, "-m", "olcli", "warm"], env=env_warmed)
    after = run_olcli(lines, tmp, env=env_warmed)
    summary = warm["output"].strip().splitlines()[-1]
    out.say("### Compilation: an empty Numba cache\n")
    out.say("| run | wall s | CPU s | load avg |\n|---|---:|---:|---:|")
    out.say(f"| first run, 2,000 lines of a9a (compiles its kernels) | {first['wall']:.2f} | {first['cpu']:.2f} | "
            f"{first['load']:.1f} |")
    out.say(f"| the same run again (cached) | {second['wall']:.2f} | {second['cpu']:.2f} | {second['load']:.1f} |")
    out.say(f"| `olcli warm` (every kernel, every algorithm; 1 process per core) | {warm['wall']:.2f} | "
            f"{warm['cpu']:.2f} | {warm['load']:.1f} |")
    out.say(f"| first run after `olcli warm` | {after['wall']:.2f} | {after['cpu']:.2f} | {after['load']:.1f} |")
    out.say(f"\n`olcli warm` said: {summary}\n")
    out.data["compile"] = {"first": _strip([first])[0], "second": _strip([second])[0],
                           "warm": {k: v for k, v in warm.items()}, "after_warm": _strip([after])[0]}


def case_algorithms(args, tmp, out: Report):
    from olcli.engine import registry

    clicks = click_log(args, 1_000_000)
    out.say("### Every algorithm, click log 1M (olcli; VW's default learner is its --gd)\n")
    out.say("| algorithm | wall s | CPU s | progressive loss | load avg |\n|---|---:|---:|---:|---:|")
    for algorithm in registry.ALGORITHMS:
        run_olcli(clicks, tmp, [f"--{algorithm}"])
        rs = [run_olcli(clicks, tmp, [f"--{algorithm}"]) for _ in range(args.runs)]
        out.say(f"| {algorithm} | {fmt(stats(rs, 'wall'))} | {fmt(stats(rs, 'cpu'))} | {rs[0]['loss']:.4f} | "
                f"{stats(rs, 'load')[0]:.1f} |")
        out.data.setdefault("algorithms", {})[algorithm] = _strip(rs)
    out.say()


def main():
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--cases", default=",".join(CASES))
    known, rest = parser.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    args = parse_arguments(__doc__.splitlines()[0])
    cases = [c for c in known.cases.split(",") if c]
    for case in cases:
        if case not in CASES:
            sys.exit(f"unknown case {case!r} (one of {', '.join(CASES)})")
    import numba
    import numpy

    out = Report()
    out.say(f"## bench_vs_vw.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    out.say(f"Machine: {os.cpu_count()} cores ({_cpu()}), Python "
            f"{platform.python_version()}, numba {numba.__version__}, numpy {numpy.__version__}, VW "
            f"{_vw_version()}; load average at the start {os.getloadavg()[0]:.1f} (other work on the machine); "
            f"{args.runs} runs per tool and file unless said; olcli's default algorithm: {_default_algorithm()}.\n")
    with tempfile.TemporaryDirectory() as tmp:
        lines = None
        for case in cases:
            if case == "start-up":
                lines = case_start_up(args, tmp, out)
            elif case == "files":
                case_files(args, tmp, out)
            elif case == "linear":
                case_linear(args, tmp, out)
            elif case == "compile":
                if lines is None:
                    lines = os.path.join(tmp, "a9a_2000.vw")
                    with open(shared_file(args, "a9a"), "rb") as f, open(lines, "wb") as g:
                        g.writelines(f.readline() for _ in range(2000))
                case_compile(args, tmp, out, lines)
            elif case == "algorithms":
                case_algorithms(args, tmp, out)
    os.makedirs(RESULTS, exist_ok=True)
    name = "bench_vs_vw" if cases == list(CASES) else "bench_vs_vw-" + "-".join(cases)
    with open(os.path.join(RESULTS, name + ".md"), "w") as f:
        f.write("\n".join(out.lines) + "\n")
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump(out.data, f, indent=1, default=str)


def _default_algorithm() -> str:
    from olcli.engine import registry

    return registry.DEFAULT_ALGORITHM


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _vw_version() -> str:
    try:
        from importlib.metadata import version

        return version("vowpalwabbit")
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
