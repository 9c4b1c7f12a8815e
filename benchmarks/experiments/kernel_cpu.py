"""The learning kernels alone, source trees side by side: thread CPU per algorithm.

    python -m benchmarks.experiments.kernel_cpu --tree before=/path/a --tree after=/path/b
                                    [--algorithms gd scinol1 scinol2] [--rounds 5] [--reps 3]
                                    [--lines 1000000] [--data DIR] [--out FILE]

For each tree, a worker process (PYTHONPATH = the tree, its own NUMBA_CACHE_DIR, so
neither tree loads the other's kernels) parses the generated click log
(olcli/datagen.py, kind ``click``) once with the tree's parser, then per algorithm runs
``reps`` + 1 passes of its learning kernel (``Learner.process``, logistic loss, -b 18,
the algorithm's defaults) over the parsed chunks from a fresh model. The first pass is
a warm-up (it loads the kernel from the Numba cache); of the others the least thread
CPU (``time.thread_time``: time spent waiting for a core does not count) is the
worker's number. The trees' workers alternate, the order rotated each round; round 0
compiles into the empty caches and is dropped. Reported per algorithm and tree: the
median (min-max) over the rounds, the ratio of the medians to the first tree, the
median of the paired per-round ratios (a slow moment of the shared machine hits both),
and whether every bit agrees with the first tree: a SHA-256 of every progressive
prediction, the final state, the scalars and the counters.

Writes benchmarks/results/kernel_cpu.md (or --out) and prints it. An experiment: it served
the decisions of refactorings (same bits, no slower kernels). The workers run this file by its
path with the tree as PYTHONPATH, so that each imports its tree's olcli and nothing of this
repository's benchmarks package (which a tree being compared may not have).
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker(path, algorithms, reps):
    """Inside a tree: the JSON {algorithm: [best thread s, its wall s, first pass thread s, digest]}."""
    import hashlib

    import numpy as np

    import olcli
    from olcli.engine.parse import LABELS_BINARY
    from olcli.engine.records import new_tally
    from olcli.inputs import read_chunks
    from olcli.learner import Learner
    from olcli.parsing import batch_of, parse_chunk

    batches = [batch_of(parse_chunk(c, "vw", 18, True, LABELS_BINARY)) for c in read_chunks([path])]
    out = {"olcli": olcli.__file__}
    for name in algorithms:
        best, first, digest = None, None, None
        for rep in range(reps + 1):
            learner = Learner(name, loss="logistic", bits=18)
            tally = new_tally()
            predictions = []
            thread, wall = time.thread_time(), time.perf_counter()
            for batch in batches:
                predictions.append(learner.process(batch, True, tally).predictions)
            thread, wall = time.thread_time() - thread, time.perf_counter() - wall
            bits = hashlib.sha256()
            for array in (*predictions, learner.model.state, learner.model.scalars, learner.model.counters):
                bits.update(np.ascontiguousarray(array).tobytes())
            if digest is not None and bits.hexdigest() != digest:
                raise SystemExit(f"{name}: two passes of one tree differ")
            digest = bits.hexdigest()
            if rep == 0:
                first = thread
            elif best is None or thread < best[0]:
                best = [thread, wall]
        out[name] = best + [first, digest]
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=False, default=[],
                        help="NAME=PATH of a source tree (the first is the reference); default: this one")
    parser.add_argument("--algorithms", nargs="+", default=["gd", "scinol1", "scinol2"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--data", default="/tmp/kernel-cpu-data")
    parser.add_argument("--cache", default="/tmp/kernel-cpu-numba", help="per-tree Numba caches go under it")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/kernel_cpu.md")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker[0], json.loads(args.worker[1]), args.reps)

    trees = [t.split("=", 1) for t in args.tree] or [["this", ROOT]]
    trees = [(name, os.path.abspath(path)) for name, path in trees]
    os.makedirs(args.data, exist_ok=True)
    data = os.path.join(args.data, f"click_{args.lines}.vw")
    if not os.path.exists(data):
        subprocess.run([sys.executable, "-m", "olcli.datagen", "click", "--lines", str(args.lines), "-o", data],
                       check=True, cwd=ROOT)
    results = {name: [] for name, _ in trees}
    loads = []
    for number in range(args.rounds + 1):
        shift = number % len(trees)
        for name, path in trees[shift:] + trees[:shift]:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env.update(PYTHONPATH=path, NUMBA_CACHE_DIR=os.path.join(args.cache, name))
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--reps", str(args.reps),
                                   "--worker", data, json.dumps(args.algorithms)],
                                  cwd=path, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{name}: worker failed:\n{done.stderr}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            if not result.pop("olcli").startswith(path + os.sep):
                sys.exit(f"{name}: the worker did not import the tree's olcli")
            if number:
                results[name].append(result)
        loads.append(os.getloadavg()[0])
        print(f"round {number}/{args.rounds} done (load {loads[-1]:.2f})", file=sys.stderr)

    from benchmarks.harness import RESULTS

    reference = trees[0][0]
    lines = [
        "# The learning kernels alone",
        "",
        f"`python -m benchmarks.experiments.kernel_cpu {' '.join(sys.argv[1:])}`; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Machine: {os.cpu_count()} cores, "
        f"shared; load average (1 min) after each round: {', '.join(f'{x:.2f}' for x in loads)}. "
        f"Python {platform.python_version()}.",
        "",
        f"The click log of olcli/datagen.py ({args.lines:,} lines, 11 features each with the constant), "
        f"parsed once per worker; thread CPU seconds of one learning pass (logistic loss, -b 18, defaults), "
        f"the best of {args.reps} after a warm-up pass; median (min-max) over {args.rounds} rounds of "
        f"alternating workers. Ratios against `{reference}`; 'bits' compares every progressive prediction, "
        f"the final state, scalars and counters.",
        "",
        "| algorithm | tree | kernel thread CPU s | ratio | paired ratio | bits |",
        "|---|---|---:|---:|---:|---|",
    ]
    for algorithm in args.algorithms:
        base = [r[algorithm] for r in results[reference]]
        for name, _ in trees:
            mine = [r[algorithm] for r in results[name]]
            thread = statistics.median(m[0] for m in mine)
            cells = f"{thread:.3f} ({min(m[0] for m in mine):.3f}-{max(m[0] for m in mine):.3f})"
            if name == reference:
                lines.append(f"| {algorithm} | {name} | {cells} | | | |")
            else:
                ratio = thread / statistics.median(b[0] for b in base)
                paired = statistics.median(m[0] / b[0] for m, b in zip(mine, base))
                same = "same" if all(m[3] == base[0][3] for m in mine) else "**differ**"
                lines.append(f"| {algorithm} | {name} | {cells} | {ratio:.3f} | {paired:.3f} | {same} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out or os.path.join(RESULTS, "kernel_cpu.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
