"""Merge rules against the alternatives: test loss of learners trained on shards and merged.

    python benchmarks/merge_rules.py [DATA_DIR]

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
multiplied (eta_base prod eta_k / eta_base). Results: benchmarks/results/merge_rules.md.
"""

import math
import os
import sys

import numpy as np
from numba import njit

from olcli.engine import adagrad, adagrad_dual, ftrl, scinol1, scinol2, sgd

MODULES = {"adagrad": adagrad, "adagrad-dual": adagrad_dual, "ftrl": ftrl, "scinol1": scinol1,
           "scinol2": scinol2, "sgd": sgd}
PARAMS = {"adagrad": [0.3, 1e-6, 0.0, 0.0, 0.0], "adagrad-dual": [0.3, 1e-6, 0.0], "ftrl": [0.5, 1.0, 0.0, 0.0],
          "scinol1": [1.0], "scinol2": [1.0], "sgd": [0.5]}
ALTERNATIVES = {"adagrad": ["vw"], "adagrad-dual": ["union"], "ftrl": ["union"], "scinol1": ["union"],
                "scinol2": ["add", "mul"], "sgd": []}
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
    def learn(state, params, rounds, index, value, row_ptr, labels, first, last):
        for e in range(first, last):
            lo, hi = row_ptr[e], row_ptr[e + 1]
            y = labels[e]
            p = predict(state, index, value, lo, hi, 0, params, rounds, True)
            z = y * p
            sigma = math.exp(-z) / (1.0 + math.exp(-z)) if z >= 0.0 else 1.0 / (1.0 + math.exp(z))
            update(state, index, value, lo, hi, 0, -y * sigma, params, rounds)
            rounds += 1.0
        return rounds
    return learn


def test_loss(w, data):
    index, value, row_ptr, labels = data
    p = np.add.reduceat(w[index] * value, row_ptr[:-1])
    return float(np.mean(np.logaddexp(0.0, -labels * p)))


def alternative(name, mode, base, shards, params, base_rounds, rounds):
    module = MODULES[name]
    out = base.copy()
    if mode == "vw":
        weights = np.stack([module.all_weights(s, params, r) for s, r in zip(shards, rounds)])
        totals = np.stack([s[:, adagrad.G] for s in shards])
        mass = totals.sum(axis=0)
        seen = mass > 0.0
        out[seen, adagrad.W] = (totals * weights).sum(axis=0)[seen] / mass[seen]
        out[seen, adagrad.G] = (totals ** 2).sum(axis=0)[seen] / mass[seen]
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
    elif name == "scinol1":
        out[:, 2] = np.max([s[:, 2] for s in shards], axis=0)
        betas = np.stack([np.where(s[:, 2] > 0.0, s[:, 3], np.inf) for s in shards]).min(axis=0)
        out[:, 3] = np.where(np.isfinite(betas), betas, base[:, 3])
    return out


def merged(name, mode, base, shards, params, base_rounds, rounds, weights):
    if mode == "rule":
        return MODULES[name].merge(base, shards, params, base_rounds, rounds, weights)
    return alternative(name, mode, base, shards, params, base_rounds, rounds)


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
        learn, params = learner(module), np.array(PARAMS[name])
        state = np.zeros((rows, len(module.SLOTS)))
        r = learn(state, params, 0.0, *train, 0, n)
        line = f"| {name} | {test_loss(module.all_weights(state, params, r), test):.4f} |"
        for count in counts:
            cuts = np.linspace(0, n, count + 1).astype(int)
            base = np.zeros((rows, len(module.SLOTS)))
            shards, rounds = [], []
            for k in range(count):
                shard = base.copy()
                rounds.append(learn(shard, params, 0.0, *train, cuts[k], cuts[k + 1]))
                shards.append(shard)
            weights = [float(cuts[k + 1] - cuts[k]) for k in range(count)]
            total = sum(rounds)
            alone = np.mean([test_loss(module.all_weights(s, params, q), test) for s, q in zip(shards, rounds)])

            def score(mode):
                state = merged(name, mode, base, shards, params, 0.0, rounds, weights)
                return test_loss(module.all_weights(state, params, total), test)

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
        learn, params = learner(module), np.array(PARAMS[name])
        state, r, losses = np.zeros((rows, len(module.SLOTS))), 0.0, []
        for _ in range(rounds_of_merging):
            r = learn(state, params, r, *train, 0, n)
            losses.append(test_loss(module.all_weights(state, params, r), test))
        print(f"| {name} | sequential | " + " | ".join(f"{x:.4f}" for x in losses) + " |")
        for mode in ["rule"] + (["vw"] if name == "adagrad" else []):
            base, base_rounds, losses = np.zeros((rows, len(module.SLOTS))), 0.0, []
            for _ in range(rounds_of_merging):
                shards, rounds = [], []
                for k in range(count):
                    shard = base.copy()
                    rounds.append(learn(shard, params, base_rounds, *train, cuts[k], cuts[k + 1]))
                    shards.append(shard)
                weights = [float(cuts[k + 1] - cuts[k]) for k in range(count)]
                base = merged(name, mode, base, shards, params, base_rounds, rounds, weights)
                base_rounds = base_rounds + sum(q - base_rounds for q in rounds)
                losses.append(test_loss(module.all_weights(base, params, base_rounds), test))
            shown = "this rule" if mode == "rule" else mode
            print(f"| {name} | {shown} | " + " | ".join(f"{x:.4f}" for x in losses) + " |", flush=True)


if __name__ == "__main__":
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
    with np.errstate(all="ignore"):
        for label in FILES:
            one_merge(data, label)
        for label in FILES:
            repeated_merges(data, label)
