"""How far behind do --mix's members fall, and do they come back? (issue 14, the multiclass cost)

    python -m benchmarks.mix_deficits [DATA_DIR] [--out benchmarks/results/mix_deficits.md] [--chunk 200]

For every set of benchmarks/defaults_vs_vw.py (same files, same generated sets at a quarter of
their size, same losses and --oaa K; single pass, -b 18), the default mixture learns the set in
chunks of CHUNK lines (``Learner("mix").learn``), and after each chunk the members' deficits
eta (L_k - min_j L_j) are read from the model's scalars (eta as the mixture's: 1 for the
logistic and multiclass losses, 1/(2 R^2) for the squared loss, R the labels' spread). Per
member: the largest deficit, the largest it had before the last chunk in which it was the best
(0 there), and the first example count after which its deficit exceeded 37 nats (where its
weight is below 1e-16 of the best's, up to the prior's ratio). The question it answers: would a
rule that stops a member once its weight is negligible ever have stopped one that came back?
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks import harness
from benchmarks.defaults_vs_vw import SETS, generate
from olcli.engine import mixture
from olcli.learner import Learner

HERE = os.path.dirname(os.path.abspath(__file__))

THRESHOLD = 37.0


def deficits(path: str, flags: str, chunk: int) -> tuple:
    kwargs = {"bits": 18, "loss": "logistic" if "logistic" in flags else "squared"}
    if "--oaa" in flags:
        kwargs["oaa"] = int(flags.split("--oaa ")[1].split()[0])
    with open(path) as handle:
        lines = handle.read().splitlines()
    learner = Learner("mix", **kwargs)
    rows, counts = [], []
    for start in range(0, len(lines), chunk):
        learner.learn(lines[start:start + chunk])
        scalars = learner.model.scalars
        losses = scalars[mixture.LOSSES:mixture.LOSSES + mixture.N_MEMBERS]
        eta = 1.0
        if kwargs["loss"] == "squared" and "oaa" not in kwargs:
            width = scalars[mixture.HIGH] - scalars[mixture.LOW]
            eta = 1.0 / (2.0 * width * width) if width > 0 else 0.0
        rows.append(eta * (losses - losses.min()))
        counts.append(min(start + chunk, len(lines)))
    return len(lines), np.array(rows), counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=harness.DATA)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "mix_deficits.md"))
    parser.add_argument("--chunk", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, train, _, flags, _) in SETS.items():
            train = generate(train[1:], 0.25, tmp) if train.startswith("@") else os.path.join(args.data, train)
            n, d, counts = deficits(train, flags, args.chunk)
            cells = []
            for k in range(mixture.N_MEMBERS):
                leads = np.flatnonzero(d[:, k] == 0.0)
                last = leads[-1] if leads.size else -1
                before = d[:last, k].max() if last > 0 else 0.0
                over = np.flatnonzero(d[:, k] > THRESHOLD)
                cells.append(f"{d[:, k].max():.1f} / {before:.1f} / {counts[over[0]] if over.size else '-'}")
            best = mixture.MEMBERS[int(np.argmin(d[-1]))]
            table.append(f"| {name} | {kind} | {n} | {best} | " + " | ".join(cells) + " |")
            print(table[-1], file=sys.stderr, flush=True)
    text = "\n".join([
        "# --mix: how far behind its members fall, and whether they come back", "",
        f"`python -m benchmarks.mix_deficits --chunk {args.chunk}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{time.perf_counter() - started:.0f} s). The sets of benchmarks/defaults_vs_vw.py, single pass, -b 18, "
        "the default mixture (prior 0.9/0.05/0.05). Per member, in nats of eta (L_k - min_j L_j): the largest "
        "deficit / the largest before the last chunk in which it was the best (0: it led at the end, or never "
        f"led after being behind) / the first example count after which the deficit exceeded {THRESHOLD:g} "
        "(its weight below ~1e-16 of the best's). Read after every chunk of lines, so a deficit inside a chunk "
        "is not seen.", "",
        "| set | kind | examples | best at the end | gd | coin | scinol2 |", "|---|---|---:|---|---|---|---|",
        *table, ""])
    with open(args.out, "w") as handle:
        handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
