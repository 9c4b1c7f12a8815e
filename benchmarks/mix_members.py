"""The default mixture and its members, pass after pass, on one machine and on K shards.

    python -m benchmarks.mix_members [DATA_DIR] [--data covtype] [--shards 1,2,4] [--passes 5]

For each pass: the test loss of the mixture and of each member inside it (the member's own
predictor: the mixture with all its weight on that member), each member's cumulative loss
L_k (the mixture's weights come from these), and the weights. The shard and merge tasks
of olcli/shard_tasks.py run in this process (benchmarks.scale_out._sharded_passes: the
functions the cluster's workers run), holdout every 10th example, no early stop. A
diagnostic for benchmarks/scale_out.py's loss table: which member the merged mixture
follows, and why.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.scale_out import _sharded_passes, _text_split, split


def train_test(name: str, data: Path, work: Path):
    if name == "covtype":
        train, test = work / "covtype_train.vw", work / "covtype_test.vw"
        split(data / "covtype_binary_20k" / "train.vw", train, test, 16000)
        return train, test
    if name == "a9a":
        return data / "a9a" / "train.vw", data / "a9a" / "test.vw"
    return _text_split(work)


def run(name: str, data: Path, work: Path, counts, passes: int, algorithm: str = "mix") -> dict:
    from olcli.engine import mixture

    train, test = train_test(name, data, work)
    test_lines, raw = test.read_bytes(), train.read_bytes()
    found = {}
    members = mixture.MEMBERS
    losses = slice(mixture.LOSSES, mixture.LOSSES + mixture.N_MEMBERS)
    for count in counts:
        rows = []
        for number, learner, holdout in _sharded_passes(algorithm, train, raw, count, passes):
            cumulative = np.array(learner.model.scalars[losses])
            pi = np.array(mixture.PRIOR) * np.exp(-(cumulative - cumulative.min()))
            row = {"pass": number, "holdout": holdout, "mix": learner.copy().evaluate(test_lines).loss,
                   "L": cumulative.tolist(), "weights": (pi / pi.sum()).tolist()}
            for k, member in enumerate(members):
                alone = learner.copy()
                alone.model.scalars[losses] = 1e9
                alone.model.scalars[mixture.LOSSES + k] = 0.0
                row[member] = alone.evaluate(test_lines).loss
            rows.append(row)
            print(f"{name} {count} shards pass {number}: " + ", ".join(
                f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {np.round(v, 3).tolist()}"
                for k, v in row.items() if k != "pass"), file=sys.stderr, flush=True)
        found[count] = rows
    return found


def table(name: str, found: dict) -> list:
    from olcli.engine import mixture

    lines = [f"### {name}", "", "| shards | pass | holdout (mix) | test: mix | " +
             " | ".join(mixture.MEMBERS) + " | L_k (cumulative losses) | weights |",
             "|---:|---:|---:|---:|" + "---:|" * len(mixture.MEMBERS) + "---|---|"]
    for count, rows in found.items():
        for row in rows:
            lines.append(f"| {count} | {row['pass']} | {row['holdout']:.4f} | {row['mix']:.4f} | " +
                         " | ".join(f"{row[m]:.4f}" for m in mixture.MEMBERS) + " | " +
                         ", ".join(f"{x:.1f}" for x in row["L"]) + " | " +
                         ", ".join(f"{w:.3f}" for w in row["weights"]) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=harness.DATA)
    parser.add_argument("--data", dest="sets", default="covtype", help="comma-separated: covtype, a9a, text")
    parser.add_argument("--shards", default="1,2,4")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the raw numbers here")
    args = parser.parse_args()
    counts = [int(c) for c in args.shards.split(",")]
    out, lines = {}, []
    with tempfile.TemporaryDirectory(prefix="olcli-mix-members-") as tmp:
        for name in args.sets.split(","):
            out[name] = run(name, Path(args.data), Path(tmp), counts, args.passes)
            lines += table(name, out[name]) + [""]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
