"""Throughput and memory of olcli against Vowpal Wabbit, side by side in one run.

    python -m benchmarks.throughput_vs_vw [--runs 3] [--long-runs 2] [--data DIR] [--skip-long] [--scale F]

Files: the click-log and text generators of olcli/datagen.py at full size (1M and
200k lines) and 10 times longer (the same generator, 10M and 2M lines). Each case is
one whole process, `olcli train FILE --loss logistic -b 18 --quiet` (every
algorithm; the default one with --threads 1 and --threads 2) or `python -m
vowpalwabbit -d FILE --loss_function logistic -b 18 --quiet` (VW 9's pip package,
its default learner), after one warm-up run of each (warm Numba cache). The cases
of a file run interleaved, the order rotated each repetition; medians are reported.

Per case (``benchmarks.harness.measure``): wall seconds, CPU seconds, peak RSS, tokens/s = the
run's total features (VW's count, which olcli reports too, constant included)
per wall second of the whole process, and the steady tokens/s of the 1x -> 10x
difference ((features 10x - features 1x) / (wall 10x - wall 1x)), which leaves
start-up out. The Numba floor (`python -c "import numba, numpy"`) is measured in
the same run. The machine is shared: the load average is printed with the
results, and CPU seconds are the steadier number.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

from benchmarks.harness import NUMBA_FLOOR, RESULTS, generated, load_average, machine, measure, run_olcli, run_vw
from olcli.engine import registry  # plain Python: no NumPy, no Numba

SIZES = {"click": 1_000_000, "text": 200_000}


class Case:
    """One command measured again and again (``benchmarks.harness``): wall, CPU, peak RSS and
    the run's feature count (olcli's report; VW's is counted once with its summary)."""

    def __init__(self, name, run):
        self.name, self._run = name, run
        self.samples = []
        self.algorithm = None

    def run(self):
        done = self._run()
        self.algorithm = done.summary.get("algorithm")  # the default may change while the script runs
        self.samples.append((done.wall, done.cpu, done.rss, done.summary.get("features")))

    def median(self, k):
        return statistics.median(s[k] for s in self.samples)

    @property
    def features(self):
        return self.samples[-1][3]


def olcli_case(name, path, report, flags=(), bits=18):
    return Case(name, lambda: run_olcli(["train", path, "--loss", "logistic", "-b", bits, "--quiet", *flags],
                                        report=report))


def vw_case(path, bits=18):
    return Case("VW", lambda: run_vw(["-d", path, "--loss_function", "logistic", "-b", bits, "--quiet"]))


def vw_features(path):
    return run_vw(["-d", path, "--loss_function", "logistic", "-b", "18"]).summary["features"]


def generate(kind, lines, folder):
    return generated(folder, kind, lines)


def interleaved(cases, runs):
    for case in cases:  # warm-up (Numba cache, page cache)
        case._run()
    for rep in range(runs):
        shift = rep % len(cases)
        for case in cases[shift:] + cases[:shift]:
            case.run()


def floor(runs):
    samples = [measure(NUMBA_FLOOR) for _ in range(runs)]
    return statistics.median(s.wall for s in samples), statistics.median(s.rss for s in samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--long-runs", type=int, default=2)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "olcli-throughput"))
    parser.add_argument("--skip-long", action="store_true", help="leave out the 10x inputs")
    parser.add_argument("--scale", type=float, default=1.0, help="file sizes x this (a quick try: 0.01)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "throughput_vs_vw.md"))
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="olcli-tp-")
    loads = [load_average()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows, long_rows, memory_rows = [], [], []
    floor_wall, floor_rss = floor(5)
    steady = {}

    for kind, lines in SIZES.items():
        lines = int(lines * args.scale)
        path = generate(kind, lines, args.data)
        vw_count = vw_features(path)
        report = os.path.join(tmp, f"{kind}.json")
        vw = vw_case(path)
        cases = [vw, olcli_case("default --threads 1", path, report, ["--threads", "1"]),
                 olcli_case("default --threads 2", path, report, ["--threads", "2"])]
        cases += [olcli_case(f"--{name}", path, report, [f"--{name}"]) for name in registry.ALGORITHMS]
        interleaved(cases, args.runs)
        loads.append(load_average())
        vw_wall, vw_cpu = vw.median(0), vw.median(1)
        for case in cases:
            features = vw_count if case is vw else case.features
            wall, cpu, rss = case.median(0), case.median(1), case.median(2)
            name = case.name if case.algorithm is None else f"{case.name} [{case.algorithm}]"
            rows.append((kind, name, wall, min(s[0] for s in case.samples), cpu, rss, features / wall / 1e6,
                         wall / vw_wall, cpu / vw_cpu, features == vw_count))
        # Memory at -b 24: the table is 2^24 rows x slots x 8 bytes.
        big = olcli_case("default -b 24", path, report, bits=24)
        big_vw = vw_case(path, bits=24)
        interleaved([big, big_vw], 1)
        table = (1 << 24) * len(registry.ALGORITHMS[big.algorithm].slots) * 8 / 2 ** 20
        memory_rows.append((kind, big.algorithm, big.median(2), big_vw.median(2), floor_rss, table))

        if not args.skip_long:
            long_path = generate(kind, 10 * lines, args.data)
            long_cases = {}
            for size, file in (("1x", path), ("10x", long_path)):
                long_cases[size] = [vw_case(file),
                                    olcli_case("olcli --threads 1", file, report, ["--threads", "1"]),
                                    olcli_case("olcli --threads 2", file, report, ["--threads", "2"])]
            for size in ("1x", "10x"):
                interleaved(long_cases[size], args.long_runs)
            vw_long_count = vw_features(long_path)
            loads.append(load_average())
            for k, name in enumerate(("VW", "olcli --threads 1", "olcli --threads 2")):
                one, ten = long_cases["1x"][k], long_cases["10x"][k]
                f1 = vw_count if k == 0 else one.features
                f10 = vw_long_count if k == 0 else ten.features
                w1, w10 = one.median(0), ten.median(0)
                steady[(kind, name)] = (f10 - f1) / (w10 - w1) / 1e6 if w10 > w1 else float("nan")
                long_rows.append((kind, name, w1, w10, w10 / w1, one.median(1), ten.median(1), one.median(2),
                                  ten.median(2), ten.median(2) / one.median(2), steady[(kind, name)]))

    loads.append(load_average())
    lines = [
        "# Throughput and memory against VW", "",
        f"`python -m benchmarks.throughput_vs_vw --runs {args.runs} --long-runs {args.long_runs}`; {started}. "
        f"Machine: {machine()}, shared with other work; load average (1 min) during the run: "
        + ", ".join(f"{x:.1f}" for x in loads) + ".", "",
        f"Numba floor (`python -c \"import numba, numpy\"`): {floor_wall:.3f} s wall, {floor_rss:.0f} MB peak RSS.",
        "", "## Whole process, -b 18, logistic loss, one pass (medians)", "",
        "| file | tool | wall s | best wall s | CPU s | peak RSS MB | Mtokens/s (wall) | wall / VW | CPU / VW | "
        "same feature count as VW |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for kind, name, wall, best, cpu, rss, tps, ratio, cpu_ratio, same in rows:
        lines.append(f"| {kind} | {name} | {wall:.2f} | {best:.2f} | {cpu:.2f} | {rss:.0f} | {tps:.1f} | "
                     f"{ratio:.2f} | {cpu_ratio:.2f} | {'yes' if same else 'no'} |")
    if long_rows:
        lines += ["", "## 10x the input (same generator, 10x the lines), medians", "",
                  "| file | tool | wall 1x s | wall 10x s | time ratio | CPU 1x s | CPU 10x s | RSS 1x MB | "
                  "RSS 10x MB | RSS ratio | steady Mtokens/s |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for kind, name, w1, w10, ratio, c1, c10, r1, r10, rr, tps in long_rows:
            lines.append(f"| {kind} | {name} | {w1:.2f} | {w10:.2f} | {ratio:.2f} | {c1:.2f} | {c10:.2f} | "
                         f"{r1:.0f} | {r10:.0f} | {rr:.3f} | {tps:.1f} |")
    lines += ["", "## Peak RSS at -b 24 (default algorithm, --threads 2), MB", "",
              "| file | algorithm | olcli | VW | Numba floor | table (2^24 x slots x 8 B) | olcli - floor - table |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for kind, algorithm, rss, vw_rss, floor_mb, table in memory_rows:
        lines.append(f"| {kind} | {algorithm} | {rss:.0f} | {vw_rss:.0f} | {floor_mb:.0f} | {table:.0f} | "
                     f"{rss - floor_mb - table:.0f} |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"rows": rows, "long_rows": long_rows, "memory_rows": memory_rows, "floor": [floor_wall, floor_rss],
                   "loads": loads, "started": started}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
