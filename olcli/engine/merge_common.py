"""What the per-algorithm merge rules share (plain NumPy, no kernels).

A cluster run starts every shard from one state (the base), lets each learn its
shard, and combines the results with the algorithm's ``merge`` (one function at
the bottom of each algorithm module; the rules and their reasons are in those
docstrings and in benchmarks/results/merge_rules.md). All rules share:

- the merged rounds counter is ``base_rounds + sum(r - base_rounds)``: the
  merged learner has made as many updates as all shards together;
- a shard whose rounds counter did not move learned nothing (an example changes
  the state only when it is learned from, and then rounds grows by one): it is
  left out, so it cannot change the result, not even in the last bit;
- with one shard left there is nothing to combine: the result is a copy of it
  (so one shard = no merge, bit for bit).
"""

import math

import numpy as np


def prepare(base, shards, base_rounds, shard_rounds, shard_weights):
    """Check the arguments. Returns ``(result, active)``: ``result`` is a new
    array when nothing needs combining (one shard, or at most one that learned),
    else None; ``active`` lists the indices of the shards that learned."""
    if len(shards) == 0:
        raise ValueError("merge needs at least one shard")
    if not len(shards) == len(shard_rounds) == len(shard_weights):
        raise ValueError("merge needs one rounds counter and one weight per shard")
    for shard in shards:
        if shard.shape != base.shape:
            raise ValueError(f"shard state has shape {shard.shape}, the base {base.shape}")
    if any(w < 0.0 for w in shard_weights):
        raise ValueError("shard weights must be >= 0")
    if len(shards) == 1:
        return np.array(shards[0], dtype=np.float64, copy=True), None
    active = [k for k, r in enumerate(shard_rounds) if r > base_rounds]
    if not active:  # nobody learned: every shard still is the base
        return np.array(base, dtype=np.float64, copy=True), None
    if len(active) == 1:
        return np.array(shards[active[0]], dtype=np.float64, copy=True), None
    return None, active


def merged_rounds(base_rounds, shard_rounds):
    """The merged learner's rounds counter: the base's plus every shard's updates."""
    return base_rounds + sum(r - base_rounds for r in shard_rounds)


def column(shards, active, slot):
    """Slot ``slot`` of the active shards, stacked: shape (shards, rows)."""
    return np.stack([shards[k][:, slot] for k in active])


def weights_where(all_weights, shards, active, params, shard_rounds, wanted):
    """Each active shard's weights (``all_weights`` at its own rounds) on the
    rows ``wanted[i]`` marks for it, 0 elsewhere: shape (shards, rows). Only
    rows a shard updated are needed, and a shard usually updates few."""
    out = np.zeros(wanted.shape)
    for i, k in enumerate(active):
        rows = wanted[i]
        out[i, rows] = all_weights(shards[k][rows], params, shard_rounds[k])
    return out


def weighted_mean(values, weights):
    """Per row, ``sum_k weights[k] values[k] / sum_k weights[k]`` and that sum
    (shape (shards, rows) in, two (rows,) arrays out). A row whose weights sum to
    0 gets 0. The weights are normalised first, so a row with one nonzero weight
    gets that shard's value exactly."""
    total = weights.sum(axis=0)
    share = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0.0)
    return (share * values).sum(axis=0), total


def mean_increment(increments, total):
    """Per row, ``sum_k increments[k]**2 / total`` with ``total = sum_k
    increments[k]``: the increments' mean weighted by themselves (0 where the
    total is 0). The growth of an accumulator (AdaGrad's G, --gd's adaptive G)
    across a merge: one shard's increment when one shard touched the row, the
    common increment when K shards grew it alike (so merging K copies of one
    learner gives that learner back), and VW's accumulate_weighted_avg
    (sum G_k^2 / sum G_k) after a merge from a zero base."""
    return np.divide((increments ** 2).sum(axis=0), total, out=np.zeros_like(total), where=total > 0.0)


def libm(function, *arrays):
    """``function`` (from ``math``) over the arrays' elements, as the compiled
    kernels call the C library: NumPy's own vectorised exp and pow can differ
    from it in the last bit. Overflow gives inf, as in the kernels."""
    def call(*args):
        try:
            return function(*args)
        except OverflowError:
            return math.inf

    return np.array([call(*args) for args in zip(*(np.asarray(a).tolist() for a in arrays))],
                    dtype=np.float64)
