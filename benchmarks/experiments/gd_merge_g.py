"""Experiment: --gd's merge rule swapped in this process only, the default mixture on K
shards pass after pass (benchmarks/mix_members.py's diagnostic: the cluster's own shard and
merge functions, holdout every 10th example, no early stop).

    python -m benchmarks.experiments.gd_merge_g covtype 4 5 before olcli union clock:1 ...

Rules (all but ``olcli`` written here only; the mixture's gd members have no --l1/--l2,
so these leave them out):

- ``olcli``: gd.merge as it is (since session 40: 3b, the relaxed move);
- ``before``: gd.merge before 3b: w the dG-weighted mean of the shards' weights,
  G = G_base + sum dG_k^2 / sum dG_k, N = max N_k;
- ``union``, ``xC``: ``before`` with G = G_base + C sum dG_k (union: C = 1);
- ``vw``: VW's accumulate_weighted_avg on the shards' totals G_k (the base's G included,
  a shard that left the row counting the base's): w = sum G_k w_k / sum G_k,
  G = sum G_k^2 / sum G_k, N = sum G_k N_k / sum G_k;
- ``unionplain``: w the plain mean of the changers, G the union's;
- ``ext:F:G``: rule G (``before`` or ``union``), then on rows the base had learned the
  merged move times F at every pairwise merge of the tree (4 shards: F^2 in all);
- ``clock:C``: G the union's; each coordinate taken to contract toward its optimum as
  exp(-kappa tau) over a pass (tau = sqrt(G_end) - sqrt(G_start), AdaGrad's clock;
  kappa = C 2 eta m / N, m = sqrt(total_weight / normalized_sum_norm_x): the diagonal
  Fisher, sum g^2 x^2, as the logistic loss's curvature), merged to where one learner on
  the union would be: w = w_base + (1 - e_U) sum_k dG_k (w_k - w_base) / (1 - e_k) / sum dG_k;
- ``relax``: ``before`` then 3b (must equal ``olcli``); ``relaxall``: 3b on every row,
  also on a row's first merge.

Results in benchmarks/results/scale_out_s40.md; raw numbers in /tmp/gd_merge_g_NAME_K.json.
"""
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import harness, mix_members
from olcli.engine import gd, merge_common

DEBUG = os.environ.get("GD_MERGE_DEBUG")
OWN = gd.merge


def _rows(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """(result, None) when nothing combines, else (None, (active, touched, G_start, grown))."""
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result, None
    touched = np.stack([(shards[k] != base).any(axis=1) for k in active])
    start = np.where(base[:, gd.G] > 0.0, base[:, gd.G], params[gd.P_INITIAL_T])
    grown = np.maximum(np.where(touched, np.stack([shards[k][:, gd.G] for k in active]) - start, 0.0), 0.0)
    return None, (active, touched, start, grown)


def _growth(rule, grown, total):
    if rule == "union":
        return total
    if rule.startswith("x"):
        return float(rule[1:]) * total
    return merge_common.mean_increment(grown, total)


def _merged(update):
    """A merge rule: _rows's answer where it has one, else a copy of the base whose rows
    the shards changed ``update(out, changed, found, base, shards, params, base_scalars,
    shard_scalars)`` writes."""
    def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None,
              shard_scalars=None, **kwargs):
        result, found = _rows(base, shards, params, base_rounds, shard_rounds, shard_weights)
        if result is not None:
            return result
        out = np.array(base, copy=True)
        update(out, found[1].any(axis=0), found, base, shards, params, base_scalars, shard_scalars)
        return out
    return merge


def before(growth="before"):
    def update(out, changed, found, base, shards, params, base_scalars, shard_scalars):
        active, touched, start, grown = found
        weights = np.stack([shards[k][:, gd.W] for k in active])
        w, total = merge_common.weighted_mean(weights, grown)
        plain = np.where(touched, weights, 0.0).sum(axis=0) / np.maximum(touched.sum(axis=0), 1)
        out[changed, gd.W] = np.where(total > 0.0, w, plain)[changed]
        out[changed, gd.G] = (start + _growth(growth, grown, total))[changed]
        out[changed, gd.N] = np.max(np.stack([base[:, gd.N]] + [shards[k][:, gd.N] for k in active]), axis=0)[changed]
    return _merged(update)


def written(rule):
    def update(out, changed, found, base, shards, params, base_scalars, shard_scalars):
        active, touched, start, grown = found

        def column(slot):
            return np.stack([shards[k][:, slot] for k in active])
        if rule == "vw":
            totals = np.where(touched, column(gd.G), start)
            total = totals.sum(axis=0)
            share = totals / np.where(total > 0, total, 1.0)
            out[changed, gd.W] = (share * np.where(touched, column(gd.W), base[:, gd.W])).sum(axis=0)[changed]
            out[changed, gd.G] = ((totals ** 2).sum(axis=0) / np.where(total > 0, total, 1.0))[changed]
            out[changed, gd.N] = (share * np.where(touched, column(gd.N), base[:, gd.N])).sum(axis=0)[changed]
        elif rule == "unionplain":
            count = touched.sum(axis=0)
            out[changed, gd.W] = (np.where(touched, column(gd.W), 0.0).sum(axis=0) / np.maximum(count, 1))[changed]
            out[changed, gd.G] = (start + grown.sum(axis=0))[changed]
            out[changed, gd.N] = np.max(np.vstack([base[None, :, gd.N], column(gd.N)]), axis=0)[changed]
    return _merged(update)


def extrapolated(rule):
    _, factor, growth = rule.split(":")
    inner = before(growth)

    def merge(base, shards, params, *args, **kwargs):
        out = inner(base, shards, params, *args, **kwargs)
        learned = (base[:, gd.G] > 0.0) & (out[:, gd.W] != base[:, gd.W])
        out[learned, gd.W] = base[learned, gd.W] + float(factor) * (out[learned, gd.W] - base[learned, gd.W])
        return out
    return merge


def clocked(rule):
    c = float(rule.split(":")[1])

    def update(out, changed, found, base, shards, params, base_scalars, shard_scalars):
        active, touched, start, grown = found
        total = grown.sum(axis=0)
        n = np.max(np.stack([base[:, gd.N]] + [shards[k][:, gd.N] for k in active]), axis=0)
        if base_scalars[gd.NORM_X_SUM] > 0:
            m = np.sqrt(base_scalars[gd.TOTAL_WEIGHT] / base_scalars[gd.NORM_X_SUM])
        else:
            m = np.sqrt(sum(shard_scalars[k][gd.TOTAL_WEIGHT] for k in active)
                        / sum(shard_scalars[k][gd.NORM_X_SUM] for k in active))
        kappa = c * 2.0 * params[gd.P_ETA] * m / np.where(n > 0, n, 1.0)
        root = np.sqrt(start)
        gain_k = -np.expm1(-kappa * (np.sqrt(start + grown) - root))      # 1 - e_k
        gain_u = -np.expm1(-kappa * (np.sqrt(start + total) - root))      # 1 - e_U
        if DEBUG:
            f = np.divide(gain_u, gain_k, out=np.ones_like(gain_k), where=gain_k > 0)[touched]
            print(f"eta {params[gd.P_ETA]} m {m:.3f} factor quantiles 10/50/90% "
                  f"{np.round(np.quantile(f, [0.1, 0.5, 0.9]), 3).tolist()}", file=sys.stderr)
        moves = np.where(touched, np.stack([shards[k][:, gd.W] for k in active]) - base[:, gd.W], 0.0)
        ratio = np.divide(moves, gain_k, out=np.zeros_like(moves), where=gain_k > 0)
        d, weight = merge_common.weighted_mean(ratio, grown)
        plain = moves.sum(axis=0) / np.maximum(touched.sum(axis=0), 1)
        w = np.where(weight > 0, base[:, gd.W] + gain_u * d, base[:, gd.W] + plain)
        out[changed, gd.W] = w[changed]
        out[changed, gd.G] = (start + total)[changed]
        out[changed, gd.N] = n[changed]
    return _merged(update)


def relaxed(rule):
    inner = before()

    def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, **kwargs):
        out = inner(base, shards, params, base_rounds, shard_rounds, shard_weights, **kwargs)
        result, found = _rows(base, shards, params, base_rounds, shard_rounds, shard_weights)
        if result is not None:
            return out
        active, touched, start, grown = found
        total, square = grown.sum(axis=0), (grown ** 2).sum(axis=0)
        n = np.divide(total ** 2, square, out=np.ones_like(total), where=square > 0)
        rows = touched.any(axis=0) & ((grown > 0).sum(axis=0) >= 2)
        if rule == "relax":
            rows &= base[:, gd.G] > 0.0
        out[rows, gd.W] = base[rows, gd.W] + np.sqrt(n[rows]) * (out[rows, gd.W] - base[rows, gd.W])
        return out
    return merge


def rule_merge(rule):
    if rule == "olcli":
        return OWN
    if rule == "before" or rule == "union" or (rule.startswith("x") and rule[1:].replace(".", "").isdigit()):
        return before(rule)
    if rule in ("vw", "unionplain"):
        return written(rule)
    if rule.startswith("ext:"):
        return extrapolated(rule)
    if rule.startswith("clock:"):
        return clocked(rule)
    if rule.startswith("relax"):
        return relaxed(rule)
    raise SystemExit(f"unknown rule {rule}")


def main() -> None:
    name, count, passes, rules = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    out = {}
    for rule in rules:
        gd.merge = rule_merge(rule)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                out[rule] = mix_members.run(name, Path(harness.DATA), Path(tmp), [count], passes)
        finally:
            gd.merge = OWN
        print("\n".join(mix_members.table(f"{name}, {rule}", out[rule])), flush=True)
    Path(f"/tmp/gd_merge_g_{name}_{count}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main()
