"""Would float32 learner state be worth it? The same examples learned with float64
and with float32 state, every algorithm, default parameters, logistic loss, -b 18.

    python -m benchmarks.float32_state [--runs 3] [--data DIR] [--files a9a,sst2,click]
                                       [--algorithms sgd,ftrl] [--out NAME]

Each file is parsed once; then the learning kernel alone (``Learner.process``, the one
door to the algorithm's kernel, the part the state's dtype can change) runs over all its
chunks with each state dtype (the learner's ``model.pool.state`` replaced by a float32 array),
alternating, after a warm-up that compiles the float32 variant. Reported: the
progressive logistic loss with each dtype and their relative difference, the largest
weight difference relative to the largest weight, the learning time (median of the
runs) and the state's size. The kernels are dtype-generic (Numba compiles one
version per state dtype), so nothing here changes the product; it measures whether
it should change. The data sets come from the harness's data folder (``--data``,
``OLCLI_BENCH_DATA``), the click log from ``olcli.datagen``; the table goes to
benchmarks/results/``--out``.md (``benchmarks.harness.Results``).
"""

import argparse
import statistics
import time

import numpy as np

from olcli.engine.records import S_LOSS, S_WEIGHT, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.inputs import read_chunks
from olcli.learner import Learner
from olcli.parsing import batch_of, parse_chunk

from benchmarks import harness

BITS = 18


def parse_file(path):
    """All chunks of a VW file, parsed once (binary labels, constant feature), as Batch records."""
    from olcli.engine.parse import LABELS_BINARY

    return [batch_of(parse_chunk(chunk, "vw", BITS, True, LABELS_BINARY)) for chunk in read_chunks([path])]


def learn(batches, name, dtype):
    """(seconds, progressive loss, final weights, state bytes) of one pass with the given state dtype."""
    learner = Learner(name, loss="logistic", bits=BITS)
    learner.model.pool.state = learner.model.pool.state.astype(dtype)  # the kernels compile one version per dtype
    tally = new_tally()
    elapsed = 0.0
    for batch in batches:
        started = time.perf_counter()
        learner.process(batch, True, tally)
        elapsed += time.perf_counter() - started
    loss = tally.stats[S_LOSS] / tally.stats[S_WEIGHT]
    return elapsed, loss, learner.weights(), learner.model.pool.state.nbytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="click,sst2,a9a", help="of click, sst2, a9a (comma-separated)")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated")
    parser.add_argument("--out", default="float32_state")
    args = harness.arguments(parser.description, runs=3, parser=parser)
    chosen = args.files.split(",")
    files = [(label, path()) for key, label, path in (
        ("click", "click log 1M", lambda: harness.click_log(args.work, 1_000_000)),
        ("sst2", "sst2", lambda: harness.shared_file(args.data, "sst2")),
        ("a9a", "a9a", lambda: harness.shared_file(args.data, "a9a"))) if key in chosen]
    harness.require(path for _, path in files)
    results = harness.Results(args.out, "float32 or float64 learner state, per algorithm")
    results.say("Each file parsed once; the learning kernel alone (Learner.process) over every chunk with "
                f"float64 and with float32 state, -b {BITS}, logistic loss, default parameters; learn s: "
                f"median of {args.runs}.")
    results.say()
    results.say("| file | algorithm | loss float64 | loss float32 | relative difference | max weight difference "
                "/ max weight | learn s float64 | learn s float32 | state MB float64 / float32 |")
    results.say("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, path in files:
        parsed = parse_file(path)
        for name in args.algorithms.split(","):
            for dtype in (np.float64, np.float32):  # warm-up: compiles each variant
                learn(parsed[:1], name, dtype)
            runs = {np.float64: [], np.float32: []}
            for _ in range(args.runs):
                for dtype in runs:
                    runs[dtype].append(learn(parsed, name, dtype))
            (_, loss64, w64, bytes64), (_, loss32, w32, bytes32) = runs[np.float64][0], runs[np.float32][0]
            t64 = statistics.median(r[0] for r in runs[np.float64])
            t32 = statistics.median(r[0] for r in runs[np.float32])
            scale = max(np.max(np.abs(w64)), 1e-300)
            with np.errstate(invalid="ignore"):
                weight_diff = np.max(np.abs(w64 - w32)) / scale
            results.say(f"| {label} | {name} | {loss64:.6f} | {loss32:.6f} | {abs(loss32 - loss64) / loss64:.1e} | "
                        f"{weight_diff:.1e} | {t64:.3f} | {t32:.3f} | {bytes64 / 2**20:.1f} / {bytes32 / 2**20:.1f} |")
    print(f"wrote {results.write(extra_json=False)}")


if __name__ == "__main__":
    main()
