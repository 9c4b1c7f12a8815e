"""What the default's members cost: the default's kernel against format 4's default's, and the
default's whole process against VW's, side by side in one run (issue 29, the tuned-VW target's
price against the wall target).

    python -m benchmarks.mix_cost [--runs 3] [--repeats 3] [--data DIR] [--scale F] [--out FILE]
                                  [--shared DIR] [--multiclass-only]

Files: the click-log and text generators of olcli/datagen.py (1M and 200k lines at --scale 1).

Part 1, kernels alone (the file parsed once into chunks of 8,192 examples, outside the timing;
one thread; best of --repeats after a warm-up): the default (``mixture.run_chunk``: --gd at
-l 0.5, 3, 10 and --coin), format 4's default (``mixture_v1.run_chunk``: --gd, --coin, ScInOL2),
and --gd and --coin alone, through ``Learner.process``.

Part 2, whole processes (``benchmarks.harness.interleaved``, medians of --runs after a warm-up):
``olcli train FILE --loss logistic -b 18 --quiet`` (the default, --threads 1 and 2) and VW 9's
``python -m vowpalwabbit -d FILE --loss_function logistic -b 18 --quiet``; wall and CPU seconds,
peak RSS. The machine is shared: the load average is printed with the results.

Part 3, multiclass whole processes (the same way): letter (K=26) and news20 (K=20) from
--shared (the training files), ``olcli train FILE --oaa K --loss logistic -b 18 --quiet``
(--threads 1 and 2) against VW's ``--oaa K --loss_function logistic -b 18 --quiet``.
"""

import argparse
import os
import statistics
import tempfile
import time

from benchmarks.harness import DATA, RESULTS, generated, interleaved, load_average, machine, run_olcli, run_vw

CHUNK = 8192
SIZES = {"click": 1_000_000, "text": 200_000}
MULTICLASS = {"letter": 26, "news20_bydate": 20}


def kernel_seconds(batches, algorithm, repeats, **hyper):
    from olcli.learner import Learner

    def once():
        learner = Learner(algorithm, loss="logistic", bits=18, **hyper)
        start = time.perf_counter()
        for batch in batches:
            learner.process(batch, True)
        return time.perf_counter() - start

    once()
    return min(once() for _ in range(repeats))


def whole_processes(kind, path, vw_name, extra, runs):
    """(kind, tool, median wall, CPU, peak RSS) of VW's and the olcli default's (--threads 1 and 2) whole
    process on ``path`` (-b 18, logistic loss, ``extra`` options for both), interleaved over ``runs``."""
    common = [path, *extra, "--loss", "logistic", "-b", "18", "--quiet"]
    cases = {vw_name: lambda: run_vw(["-d", path, *extra, "--loss_function", "logistic", "-b", "18", "--quiet"]),
             "olcli default --threads 1": lambda: run_olcli(["train", *common, "--threads", "1"]),
             "olcli default --threads 2": lambda: run_olcli(["train", *common, "--threads", "2"])}
    rows = []
    for name, results in interleaved(cases, runs).items():
        assert all(r.returncode == 0 for r in results), (name, results[0].stderr[-500:])
        rows.append((kind, name, statistics.median(r.wall for r in results),
                     statistics.median(r.cpu for r in results), statistics.median(r.rss for r in results)))
        print(kind, name, rows[-1][2:], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "olcli-throughput"))
    parser.add_argument("--multiclass-only", action="store_true", help="part 3 alone")
    parser.add_argument("--shared", default=DATA, help="the shared data folder (letter/, news20_bydate/)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "mix_cost.md"))
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    from olcli.learner import Learner

    loads = [load_average()]
    kernels, processes = [], []
    for kind, size in ({} if args.multiclass_only else SIZES).items():
        lines_n = int(size * args.scale)
        path = generated(args.data, kind, lines_n)
        lines = open(path, "rb").read().splitlines()
        reader = Learner("mix", loss="logistic", bits=18)
        batches = [reader.to_batch(lines[i:i + CHUNK])[0] for i in range(0, len(lines), CHUNK)]
        runs = {"default: --gd -l 0.5/3/10, --coin (mixture.run_chunk)": ("mix", {}),
                "format 4's default: --gd, --coin, ScInOL2 (mixture_v1.run_chunk)": ("mix-v1", {}),
                "--gd alone": ("gd", {}), "--coin alone": ("coin", {})}
        for label, (algorithm, hyper) in runs.items():
            seconds = kernel_seconds(batches, algorithm, args.repeats, **hyper)
            kernels.append((kind, lines_n, label, seconds))
            print(kind, label, f"{seconds:.3f} s", flush=True)
        loads.append(load_average())
        processes += whole_processes(kind, path, "VW default", [], args.runs)
        loads.append(load_average())
    for kind, classes in MULTICLASS.items():
        path = os.path.join(args.shared, kind, "train.vw")
        processes += whole_processes(kind, path, "VW --oaa", ["--oaa", str(classes)], args.runs)
        loads.append(load_average())
    out = ["# The default's cost: its kernel against format 4's default's, its process against VW's", "",
           f"`python -m benchmarks.mix_cost --runs {args.runs} --repeats {args.repeats} --scale {args.scale}`; "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. {machine()}; load average (1 min) during the run: "
           f"{', '.join(f'{x:.1f}' for x in loads)}.", "",
           "## Kernels alone (parsed once outside the timing; one thread; best of "
           f"{args.repeats})", "",
           "| file | lines | kernel | seconds | / format 4's default |", "|---|---:|---|---:|---:|"]
    for kind in SIZES:
        rows = [r for r in kernels if r[0] == kind]
        if not rows:
            continue
        old = [r[3] for r in rows if r[2].startswith("format 4")][0]
        out += [f"| {k} | {n} | {label} | {s:.3f} | {s / old:.2f} |" for k, n, label, s in rows]
    out += ["", f"## Whole process, -b 18, logistic loss, one pass (medians of {args.runs})", "",
            "| file | tool | wall s | CPU s | peak RSS MB | wall / VW | CPU / VW |", "|---|---|---:|---:|---:|---:|---:|"]
    for kind in [*SIZES, *MULTICLASS]:
        if kind == next(iter(MULTICLASS)):
            out += ["", f"## Whole process, multiclass: --oaa K, logistic loss, -b 18, one pass (medians of {args.runs})",
                    "", "| file | tool | wall s | CPU s | peak RSS MB | wall / VW | CPU / VW |",
                    "|---|---|---:|---:|---:|---:|---:|"]
        rows = [r for r in processes if r[0] == kind]
        if not rows:
            continue
        vw = [r for r in rows if r[1].startswith("VW")][0]
        out += [f"| {k} | {name} | {w:.2f} | {c:.2f} | {m:.0f} | {w / vw[2]:.2f} | {c / vw[3]:.2f} |"
                for k, name, w, c, m in rows]
    text = "\n".join(out) + "\n"
    print(text)
    with open(args.out, "w") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
