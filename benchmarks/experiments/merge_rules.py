"""Merge rules against the alternatives: test loss of learners trained on shards and merged.

    python -m benchmarks.experiments.merge_rules [DATA_DIR [ALGORITHM ...]]

DATA_DIR defaults to ../shared/data. Files are read as libsvm (feature i -> row i, plus a
constant feature in row 0; no hashing) and learned with logistic loss, every algorithm at
its defaults, straight through the kernels' predict/update (no driver, no parser).

Two experiments, both scored by the logistic loss of the merged weights on a test set (a9a:
its test file; phishing and cod-rna have none, so their training file):

- one merge: the training file split into N contiguous shards, each learned from a zero
  base, merged once; next to one learner over the whole file ("sequential") and the mean
  loss of the N shard learners alone;
- repeated merges, as VW's allreduce does after every pass: 8 fixed shards, 4 rounds of
  (every shard learns its part from the current base, merge, the result is the next base).

The alternatives are written here, not in olcli: "vw" is VW's accumulate_weighted_avg
(weights and G averaged with weights G_k, the nodes' totals; G = sum G_k**2 / sum G_k),
"union" adds every slot's increments (the state of one learner that got every shard's
gradients), "add"/"mul" are ScInOL2 with the union of G and S2 and the wealth eta added /
multiplied (eta_base prod eta_k / eta_base); for --gd "vw" averages every slot (N too) by the
G_k, as VW does; for --coin "union" adds Z, G and the wealth, keeps the maxima of M and L, and
takes the weight of the resulting bettors, and "pooled wealth" and "averaged weight" are
scale_out.py's COIN_RULES (the union's bettor with the dG-weighted mean of the wealth; the rule
before 2026-11-25). Results: benchmarks/results/merge_rules.md.
"""

import argparse
import math
import os

import numpy as np
from numba import njit

from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, scinol1, scinol2, sgd
from olcli.engine.records import C_ROUNDS, C_WEIGHT, N_COUNTERS, Settings, Table
from olcli.engine.registry import ALGORITHMS
from benchmarks.harness import DATA
from benchmarks.scale_out import COIN_RULES, _coin_variant

MODULES = {"adagrad": adagrad, "adagrad-dual": adagrad_dual, "ftrl": ftrl, "scinol1": scinol1,
           "scinol2": scinol2, "sgd": sgd, "gd": gd, "coin": coin}
PARAMS = {"adagrad": [0.3, 1e-6, 0.0, 0.0, 0.0], "adagrad-dual": [0.3, 1e-6, 0.0], "ftrl": [0.5, 1.0, 0.0, 0.0],
          "scinol1": [1.0], "scinol2": [1.0], "sgd": [0.5, 0.5, 0.0], "gd": [0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0],
          "coin": [4.0, 1.0]}
ALTERNATIVES = {"adagrad": ["vw"], "adagrad-dual": ["union"], "ftrl": ["union"], "scinol1": ["union"],
                "scinol2": ["add", "mul"], "sgd": [], "gd": ["vw"],
                "coin": ["union", "pooled wealth", "averaged weight"]}


class Learned:
    """A state with its counters and scalars (what the kernels' Table holds)."""

    def __init__(self, name, rows):
        spec = ALGORITHMS[name]
        self.name = name
        self.state = np.zeros((rows, len(spec.slots)))
        self.counters = np.zeros(N_COUNTERS)
        self.scalars = np.array(spec.initial_scalars(dict(zip(MODULES[name].PARAMS, PARAMS[name]))), dtype=float)

    @property
    def rounds(self):
        return float(self.counters[C_ROUNDS])

    def copy(self):
        out = Learned.__new__(Learned)
        out.name, out.state, out.counters, out.scalars = self.name, self.state.copy(), self.counters.copy(), \
            self.scalars.copy()
        return out

    def table(self):
        return Table(self.state, self.counters, self.scalars)

    def weights(self):
        module = MODULES[self.name]
        if getattr(module, "SCALARS", None):
            return module.all_weights(self.state, np.array(PARAMS[self.name]), self.rounds, self.scalars)
        return module.all_weights(self.state, np.array(PARAMS[self.name]), self.rounds)
FILES = {"a9a": ("a9a/train.libsvm", "a9a/test.libsvm", 124),
         "phishing": ("phishing_libsvm/train.libsvm", "phishing_libsvm/train.libsvm", 69),
         "cod-rna": ("cod_rna/train.shuf42.libsvm", "cod_rna/train.shuf42.libsvm", 9)}


def load(path):
    index, value, row_ptr, labels = [], [], [0], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            labels.append(1.0 if float(parts[0]) > 0 else -1.0)
            index.append(0)
            value.append(1.0)
            for part in parts[1:]:
                i, v = part.split(":")
                index.append(int(i))
                value.append(float(v))
            row_ptr.append(len(index))
    return np.array(index, np.int64), np.array(value), np.array(row_ptr, np.int64), np.array(labels)


def learner(module):
    predict, update = module.predict, module.update

    @njit
    def learn_kernel(table, settings, index, value, row_ptr, labels, first, last):
        for e in range(first, last):
            lo, hi = row_ptr[e], row_ptr[e + 1]
            y = labels[e]
            p = predict(table, settings, index, value, lo, hi, 0, True, 1.0)
            z = y * p
            sigma = math.exp(-z) / (1.0 + math.exp(-z)) if z >= 0.0 else 1.0 / (1.0 + math.exp(z))
            table.counters[C_WEIGHT] += 1.0
            update(table, settings, index, value, lo, hi, 0, p, y, 1.0, -y * sigma)
            table.counters[C_ROUNDS] += 1.0

    def learn(learned, params, data, first, last):
        """Learn examples [first, last) of ``data`` (logistic loss) into ``learned``, in place."""
        settings = Settings(np.asarray(params, dtype=np.float64), 1, 0.5, False, True, 0, 0, False, math.nan,
                            math.nan)
        learn_kernel(learned.table(), settings, *data, first, last)
        return learned
    return learn


def test_loss(w, data):
    index, value, row_ptr, labels = data
    p = np.add.reduceat(w[index] * value, row_ptr[:-1])
    return float(np.mean(np.logaddexp(0.0, -labels * p)))


def alternative(name, mode, base, shards, params, base_rounds, rounds, scalars=None):
    module = MODULES[name]
    out = base.copy()
    if mode == "vw":  # VW's do_weighting: weights and G averaged by the nodes' totals G_k
        weights = np.stack([module.all_weights(s, params, r) for s, r in zip(shards, rounds)])
        totals = np.stack([s[:, module.G] for s in shards])
        mass = totals.sum(axis=0)
        seen = mass > 0.0
        out[seen, module.W] = (totals * weights).sum(axis=0)[seen] / mass[seen]
        out[seen, module.G] = (totals ** 2).sum(axis=0)[seen] / mass[seen]
        if name == "gd":  # VW scales the normaliser slot alike
            out[seen, gd.N] = (totals * np.stack([s[:, gd.N] for s in shards])).sum(axis=0)[seen] / mass[seen]
        return out
    for shard in shards:
        out += shard - base
    if mode in ("add", "mul"):  # the wealth starts from eps on rows the base had not touched
        start = np.where(base[:, 2] > 0.0, base[:, 3], params[0])
        etas = np.stack([np.where(s[:, 2] > 0.0, s[:, 3], start) for s in shards])
        touched = out[:, 2] > 0.0
        out[:, 2] = np.max([s[:, 2] for s in shards], axis=0)
        combined = start + (etas - start).sum(axis=0) if mode == "add" else start * np.prod(etas / start, axis=0)
        out[:, 3] = np.where(touched, combined, base[:, 3])
    elif name == "coin":  # running maxima stay maxima; Z, G and the wealth added; w = bet / A
        out[:, coin.M] = np.max([s[:, coin.M] for s in shards], axis=0)
        out[:, coin.L] = np.max([s[:, coin.L] for s in shards], axis=0)
        lm = out[:, coin.L] * out[:, coin.M]
        denominator = lm * (lm + out[:, coin.G])
        bet = np.where(denominator > 0.0, (params[0] + out[:, coin.WEALTH]) / denominator * out[:, coin.Z], 0.0)
        out[:, coin.W] = bet / ((scalars[0] + 1e-6) / scalars[1])
    elif name == "scinol1":
        out[:, 2] = np.max([s[:, 2] for s in shards], axis=0)
        betas = np.stack([np.where(s[:, 2] > 0.0, s[:, 3], np.inf) for s in shards]).min(axis=0)
        out[:, 3] = np.where(np.isfinite(betas), betas, base[:, 3])
    return out


def merged(name, mode, base, shards, params, weights):
    """The merged Learned (state, counters, scalars) of shards learned from ``base``."""
    module = MODULES[name]
    rounds = [s.rounds for s in shards]
    out = base.copy()
    out.counters[[C_ROUNDS, C_WEIGHT]] += sum(s.counters[[C_ROUNDS, C_WEIGHT]] - base.counters[[C_ROUNDS, C_WEIGHT]]
                                              for s in shards)
    states = [s.state for s in shards]
    if getattr(module, "SCALARS", None):
        scalars = [s.scalars for s in shards]
        out.scalars = module.merge_scalars(base.scalars, scalars, params, base.rounds, rounds, weights)
        if name == "coin" and mode in COIN_RULES:  # the other wealth rules of benchmarks/scale_out.py
            out.state = _coin_variant(mode)(base.state, states, params, base.rounds, rounds, weights,
                                            base_scalars=base.scalars, shard_scalars=scalars)
            return out
        if mode == "rule":
            out.state = module.merge(base.state, states, params, base.rounds, rounds, weights,
                                     base_scalars=base.scalars, shard_scalars=scalars)
            return out
    elif mode == "rule":
        out.state = module.merge(base.state, states, params, base.rounds, rounds, weights)
        return out
    out.state = alternative(name, mode, base.state, states, params, base.rounds, rounds, out.scalars)
    return out


def one_merge(data_dir, label, counts=(4, 16)):
    train_path, test_path, rows = FILES[label]
    train, test = load(os.path.join(data_dir, train_path)), load(os.path.join(data_dir, test_path))
    n = len(train[3])
    print(f"\n{label}: one merge of N shards from a zero base (test loss)\n")
    header = "| algorithm | sequential |" + "".join(
        f" N={c} shard alone | N={c} this rule | N={c} alternatives |" for c in counts)
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, module in MODULES.items():
        if ONLY and name not in ONLY:
            continue
        learn, params = learner(module), np.array(PARAMS[name])
        whole = learn(Learned(name, rows), params, train, 0, n)
        line = f"| {name} | {test_loss(whole.weights(), test):.4f} |"
        for count in counts:
            cuts = np.linspace(0, n, count + 1).astype(int)
            base = Learned(name, rows)
            shards = [learn(base.copy(), params, train, cuts[k], cuts[k + 1]) for k in range(count)]
            weights = [float(cuts[k + 1] - cuts[k]) for k in range(count)]
            alone = np.mean([test_loss(s.weights(), test) for s in shards])

            def score(mode):
                return test_loss(merged(name, mode, base, shards, params, weights).weights(), test)

            rule = score("rule")
            others = ", ".join(f"{mode} {score(mode):.4g}" for mode in ALTERNATIVES[name])
            line += f" {alone:.4f} | **{rule:.4f}** | {others or '—'} |"
        print(line, flush=True)


def repeated_merges(data_dir, label, count=8, rounds_of_merging=4):
    train_path, test_path, rows = FILES[label]
    train, test = load(os.path.join(data_dir, train_path)), load(os.path.join(data_dir, test_path))
    n = len(train[3])
    cuts = np.linspace(0, n, count + 1).astype(int)
    print(f"\n{label}: {count} shards, merged after every pass (test loss after pass 1..{rounds_of_merging})\n")
    print("| algorithm | rule | " + " | ".join(f"pass {p + 1}" for p in range(rounds_of_merging)) + " |")
    print("|---|---|" + "---|" * rounds_of_merging)
    for name, module in MODULES.items():
        if ONLY and name not in ONLY:
            continue
        learn, params = learner(module), np.array(PARAMS[name])
        whole, losses = Learned(name, rows), []
        for _ in range(rounds_of_merging):
            whole = learn(whole, params, train, 0, n)
            losses.append(test_loss(whole.weights(), test))
        print(f"| {name} | sequential | " + " | ".join(f"{x:.4f}" for x in losses) + " |")
        for mode in ["rule"] + (["vw"] if name in ("adagrad", "gd") else ["pooled wealth", "averaged weight"] if name == "coin" else []):
            base, losses = Learned(name, rows), []
            for _ in range(rounds_of_merging):
                shards = [learn(base.copy(), params, train, cuts[k], cuts[k + 1]) for k in range(count)]
                weights = [float(cuts[k + 1] - cuts[k]) for k in range(count)]
                base = merged(name, mode, base, shards, params, weights)
                losses.append(test_loss(base.weights(), test))
            shown = "this rule" if mode == "rule" else mode
            print(f"| {name} | {shown} | " + " | ".join(f"{x:.4f}" for x in losses) + " |", flush=True)


ONLY: list = []  # only these algorithms (the command line's second and later words), or all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=DATA, help="the data folder (default: harness.DATA)")
    parser.add_argument("only", nargs="*", help="only these algorithms (default: all)")
    args = parser.parse_args()
    ONLY[:] = args.only
    data = args.data
    with np.errstate(all="ignore"):
        for label in FILES:
            one_merge(data, label)
        for label in FILES:
            repeated_merges(data, label)


if __name__ == "__main__":
    main()
