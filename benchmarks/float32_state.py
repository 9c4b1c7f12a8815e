"""Would float32 learner state be worth it? The same examples learned with float64
and with float32 state, every algorithm, default parameters, logistic loss, -b 18.

    python -m benchmarks.float32_state [--runs 3] [--data DIR]

Each file is parsed once; then the learning kernel alone (``Learner.process``, the one
door to the algorithm's kernel, the part the state's dtype can change) runs over all its
chunks with each state dtype (the learner's ``model.state`` replaced by a float32 array),
alternating, after a warm-up that compiles the float32 variant. Reported: the
progressive logistic loss with each dtype and their relative difference, the largest
weight difference relative to the largest weight, the learning time (median of the
runs) and the state's size. The kernels are dtype-generic (Numba compiles one
version per state dtype), so nothing here changes the product; it measures whether
it should change.
"""

import statistics
import time

import numpy as np

from olcli.engine.records import S_LOSS, S_WEIGHT, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.inputs import read_chunks
from olcli.learner import Learner
from olcli.parsing import batch_of, parse_chunk

from benchmarks.setup_data import click_log, parse_arguments, require, shared_file  # noqa: E402

BITS = 18


def parse_file(path):
    """All chunks of a VW file, parsed once (binary labels, constant feature), as Batch records."""
    from olcli.engine.parse import LABELS_BINARY

    return [batch_of(parse_chunk(chunk, "vw", BITS, True, LABELS_BINARY)) for chunk in read_chunks([path])]


def learn(batches, name, dtype):
    """(seconds, progressive loss, final weights, state bytes) of one pass with the given state dtype."""
    learner = Learner(name, loss="logistic", bits=BITS)
    learner.model.state = learner.model.state.astype(dtype)  # the kernels compile one version per dtype
    tally = new_tally()
    elapsed = 0.0
    for batch in batches:
        started = time.perf_counter()
        learner.process(batch, True, tally)
        elapsed += time.perf_counter() - started
    loss = tally.stats[S_LOSS] / tally.stats[S_WEIGHT]
    return elapsed, loss, learner.weights(), learner.model.state.nbytes


def main():
    args = parse_arguments(__doc__.splitlines()[0])
    files = [("click log 1M", click_log(args, 1_000_000)), ("sst2", shared_file(args, "sst2")),
             ("a9a", shared_file(args, "a9a"))]
    require(files)

    print("| file | algorithm | loss float64 | loss float32 | relative difference | max weight difference "
          "/ max weight | learn s float64 | learn s float32 | state MB float64 / float32 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, path in files:
        parsed = parse_file(path)
        for name in ALGORITHMS:
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
            print(f"| {label} | {name} | {loss64:.6f} | {loss32:.6f} | {abs(loss32 - loss64) / loss64:.1e} | "
                  f"{weight_diff:.1e} | {t64:.3f} | {t32:.3f} | {bytes64 / 2**20:.1f} / {bytes32 / 2**20:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
