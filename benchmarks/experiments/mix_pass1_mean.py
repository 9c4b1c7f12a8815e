"""Experiment (not olcli's rule): the default mixture on K shards with pass 1's member losses
counted as their mean over the shards (one learning curve's worth, as one machine has) and the
later passes' held-out losses added as merged (base plus the shards' increments).

    python -m benchmarks.experiments.mix_pass1_mean covtype 5

Runs benchmarks/mix_members.py's diagnostic (4 shards) with shard_tasks.finish_pass replaced
in this process only; results in benchmarks/results/scale_out_s38.md.
"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import harness, mix_members
from olcli import scaleout
from olcli.engine import mixture


def finish(base, merged, part, first_pass=None):
    """After the run's first pass (the base's losses all 0) on K >= 2 shards: L_k the shards' mean."""
    learned = sum(1 for r in part.shards if r.examples > 0)
    losses = slice(mixture.LOSSES, mixture.LOSSES + mixture.N_MEMBERS)
    before = base.model.scalars[losses]
    if learned >= 2 and not np.any(before):
        scalars = np.array(merged.model.scalars, copy=True)
        scalars[losses] = (scalars[losses] - before) / learned
        merged.model.scalars = scalars


def main() -> None:
    name, passes = sys.argv[1], int(sys.argv[2])
    scaleout.finish_pass = finish
    with tempfile.TemporaryDirectory() as tmp:
        out = mix_members.run(name, Path(harness.DATA), Path(tmp), [4], passes)
    Path(f"/tmp/mix_pass1_mean_{name}.json").write_text(json.dumps(out))
    print("\n".join(mix_members.table(name, out)))


if __name__ == "__main__":
    main()
