"""olcli against Vowpal Wabbit and the Numba floor, side by side in one run.

    pip install ".[bench]" && python -m benchmarks.bench_vs_vw [--runs 5] [--data DIR] [--work DIR]
                                                               [--cases start-up,files,linear,compile,algorithms]

Cases, each measured in this one run, the tools alternating run by run:

- ``start-up``: the first 2,000 lines of ``a9a/train.vw``: ``olcli train`` (default algorithm,
  ``--loss logistic -b 18``), VW (``python -m vowpalwabbit``, the pip package's CLI, same
  options), and the floors: the Numba floor ``python -c "import numba, numpy"`` and Python
  itself (``python -c pass``). ``--runs`` x 3 rounds. Target: olcli wall <= 1.3 x the
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

Each measurement (``benchmarks.harness.measure``) gives wall seconds, CPU seconds, peak RSS
and the load average while it ran: the machine is shared, so CPU seconds are the steadier
number. Medians (min-max) of the runs. Results: the tables on stdout and in
``benchmarks/results/bench_vs_vw.md``, the raw numbers in ``benchmarks/results/bench_vs_vw.json``
(``bench_vs_vw-CASES.md/.json`` when only some cases ran).
"""

import os
import statistics
import sys
import tempfile

from benchmarks.harness import (Results, arguments, click_log, default_algorithm, fmt, generated, head, measure,
                                NUMBA_FLOOR, PY, require, run_olcli, run_vw, shared_file, stats)

CASES = ("start-up", "files", "linear", "compile", "algorithms")


def olcli(path, tmp, extra=(), env=None):
    """olcli train at the benchmark's options, its report's loss, examples and features."""
    return run_olcli(["train", path, "--loss", "logistic", "-b", "18", "--quiet", *extra],
                     report=os.path.join(tmp, "report.json"), env=env)


def vw(path):
    return run_vw(["-d", path, "--loss_function", "logistic", "-b", "18"])


def of(runs, key):
    """(median, min, max) of one number over runs."""
    return stats(r.numbers()[key] for r in runs)


def _numbers(runs):
    return [r.numbers() for r in runs]


def case_start_up(args, tmp, out: Results):
    lines = os.path.join(tmp, "a9a_2000.vw")
    head(shared_file(args.data, "a9a"), 2000, lines)
    tools = {
        "olcli": lambda: olcli(lines, tmp),
        "VW": lambda: vw(lines),
        "Numba floor": lambda: measure(NUMBA_FLOOR),
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
        out.say(f"| {name} | {fmt(of(rs, 'wall'), 3)} | {fmt(of(rs, 'cpu'), 3)} | "
                f"{of(rs, 'rss')[0]:.0f} | {of(rs, 'load')[0]:.1f} |")
    wall = {name: of(rs, "wall")[0] for name, rs in runs.items()}
    cpu = {name: of(rs, "cpu")[0] for name, rs in runs.items()}
    # Paired ratios: each olcli run against the floor run right after it.
    paired = [o.wall / f.wall for o, f in zip(runs["olcli"], runs["Numba floor"])]
    out.say(f"\nolcli / Numba floor: wall {wall['olcli'] / wall['Numba floor']:.2f} (run by run: median "
            f"{statistics.median(paired):.2f}, {min(paired):.2f}-{max(paired):.2f}), CPU "
            f"{cpu['olcli'] / cpu['Numba floor']:.2f}; olcli / VW: wall {wall['olcli'] / wall['VW']:.2f}, "
            f"CPU {cpu['olcli'] / cpu['VW']:.2f}; olcli's own time above the floor: "
            f"{wall['olcli'] - wall['Numba floor']:.3f} s wall, {cpu['olcli'] - cpu['Numba floor']:.3f} s CPU. "
            f"Target: wall <= 1.3 x the floor.\n")
    out.data["start-up"] = {name: _numbers(rs) for name, rs in runs.items()}
    return lines


def _compare(label, path, args, tmp, out: Results, runs=None):
    olcli(path, tmp)
    vw(path)  # warm-up
    results = {"olcli": [], "VW": []}
    for _ in range(runs or args.runs):
        results["olcli"].append(olcli(path, tmp))
        results["VW"].append(vw(path))
    for tool, rs in results.items():
        wall, cpu = of(rs, "wall"), of(rs, "cpu")
        examples, features, loss = rs[0].summary["examples"], rs[0].summary["features"], rs[0].summary["loss"]
        out.say(f"| {label} | {tool} | {fmt(wall)} | {fmt(cpu)} | {examples / wall[0]:,.0f} | "
                f"{features / wall[0]:,.0f} | {of(rs, 'rss')[0]:.0f} | {loss:.4f} | {of(rs, 'load')[0]:.1f} |")
    out.data.setdefault("files", {})[label] = {tool: _numbers(rs) for tool, rs in results.items()}
    return {tool: (of(rs, "wall")[0], of(rs, "cpu")[0], of(rs, "rss")[0]) for tool, rs in results.items()}


FILE_HEADER = ("| file | tool | wall s, median (min-max) | CPU s | examples/s (wall) | features/s (wall) | peak RSS MB "
               "| progressive loss | load avg |\n|---|---|---:|---:|---:|---:|---:|---:|---:|")


def case_files(args, tmp, out: Results):
    files = [("click log 1M", click_log(args.work, 1_000_000)), ("text 200k", generated(args.work, "text")),
             ("a9a", shared_file(args.data, "a9a")), ("sst2 (text)", shared_file(args.data, "sst2"))]
    require(path for _, path in files)
    out.say("### Files: olcli (default algorithm) and VW, `--loss logistic -b 18`, one pass\n")
    out.say(FILE_HEADER)
    ratios = [(label, _compare(label, path, args, tmp, out)) for label, path in files]
    out.say("\n| file | wall olcli/VW | CPU olcli/VW | peak RSS olcli/VW |\n|---|---:|---:|---:|")
    for label, r in ratios:
        out.say(f"| {label} | {r['olcli'][0] / r['VW'][0]:.2f} | {r['olcli'][1] / r['VW'][1]:.2f} | "
                f"{r['olcli'][2] / r['VW'][2]:.2f} |")
    out.say()


def case_linear(args, tmp, out: Results):
    small, large = click_log(args.work, 1_000_000), click_log(args.work, 10_000_000)
    out.say("### Linear time, flat memory: the click log at 1M and 10M lines\n")
    out.say(FILE_HEADER)
    one = _compare("click log 1M", small, args, tmp, out)
    ten = _compare("click log 10M", large, args, tmp, out, runs=max(1, args.runs // 2))
    out.say("\n| tool | time 10M / 1M (wall) | CPU 10M / 1M | peak RSS 10M / 1M |\n|---|---:|---:|---:|")
    for tool in ("olcli", "VW"):
        out.say(f"| {tool} | {ten[tool][0] / one[tool][0]:.2f} | {ten[tool][1] / one[tool][1]:.2f} | "
                f"{ten[tool][2] / one[tool][2]:.3f} |")
    out.say("\nTargets: time <= 10.5 x, peak RSS the same (+-5%).\n")


def case_compile(args, tmp, out: Results, lines):
    cold = os.path.join(tmp, "cold-cache")
    warmed = os.path.join(tmp, "warmed-cache")
    env_cold = {**os.environ, "NUMBA_CACHE_DIR": cold}
    env_warmed = {**os.environ, "NUMBA_CACHE_DIR": warmed}
    first = olcli(lines, tmp, env=env_cold)
    second = olcli(lines, tmp, env=env_cold)
    warm = run_olcli(["warm"], env=env_warmed)
    after = olcli(lines, tmp, env=env_warmed)
    summary = warm.output.strip().splitlines()[-1]
    out.say("### Compilation: an empty Numba cache\n")
    out.say("| run | wall s | CPU s | load avg |\n|---|---:|---:|---:|")
    out.say(f"| first run, 2,000 lines of a9a (compiles its kernels) | {first.wall:.2f} | {first.cpu:.2f} | "
            f"{first.load:.1f} |")
    out.say(f"| the same run again (cached) | {second.wall:.2f} | {second.cpu:.2f} | {second.load:.1f} |")
    out.say(f"| `olcli warm` (every kernel, every algorithm; 1 process per core) | {warm.wall:.2f} | "
            f"{warm.cpu:.2f} | {warm.load:.1f} |")
    out.say(f"| first run after `olcli warm` | {after.wall:.2f} | {after.cpu:.2f} | {after.load:.1f} |")
    out.say(f"\n`olcli warm` said: {summary}\n")
    out.data["compile"] = {"first": first.numbers(), "second": second.numbers(),
                           "warm": warm.numbers(), "after_warm": after.numbers()}


def case_algorithms(args, tmp, out: Results):
    from olcli.engine import registry

    clicks = click_log(args.work, 1_000_000)
    out.say("### Every algorithm, click log 1M (olcli; VW's default learner is its --gd)\n")
    out.say("| algorithm | wall s | CPU s | progressive loss | load avg |\n|---|---:|---:|---:|---:|")
    for algorithm in registry.ALGORITHMS:
        olcli(clicks, tmp, [f"--{algorithm}"])
        rs = [olcli(clicks, tmp, [f"--{algorithm}"]) for _ in range(args.runs)]
        out.say(f"| {algorithm} | {fmt(of(rs, 'wall'))} | {fmt(of(rs, 'cpu'))} | {rs[0].summary['loss']:.4f} | "
                f"{of(rs, 'load')[0]:.1f} |")
        out.data.setdefault("algorithms", {})[algorithm] = _numbers(rs)
    out.say()


def main():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    args = arguments(__doc__.splitlines()[0], parser=parser)
    cases = [c for c in args.cases.split(",") if c]
    for case in cases:
        if case not in CASES:
            sys.exit(f"unknown case {case!r} (one of {', '.join(CASES)})")
    name = "bench_vs_vw" if cases == list(CASES) else "bench_vs_vw-" + "-".join(cases)
    out = Results(name, "olcli against VW and the Numba floor")
    out.say(f"{args.runs} runs per tool and file unless said; olcli's default algorithm: {default_algorithm()}.\n")
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
                    lines = head(shared_file(args.data, "a9a"), 2000, os.path.join(tmp, "a9a_2000.vw"))
                case_compile(args, tmp, out, lines)
            elif case == "algorithms":
                case_algorithms(args, tmp, out)
            out.note_load()
    out.write()


if __name__ == "__main__":
    main()
