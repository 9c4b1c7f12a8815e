"""Training on a Dask cluster: loss against one machine, speed-up, merge cost.

    python -m benchmarks.scale_out [DATA_DIR] [--out benchmarks/results/scale_out.md]
        [--parts loss,speed,merge,rule,members,coin]

DATA_DIR defaults to ../shared/data. Every run is the real command (``python -m olcli
train ... --report R``) in a subprocess; the numbers come from the JSON reports.

1. Loss. a9a (its test file), covtype_binary_20k (the first 16,000 lines train, the last
   4,000 test) and the text generator (``python -m olcli.datagen text``, 240,000 lines of one
   seed: the first 200,000 train, the last 40,000 test). Logistic loss, the default
   algorithm (registry.DEFAULT_ALGORITHM, named in the results), ``--passes P`` with the default holdout (every 10th example) and
   early stop, on one machine and on a local cluster of 2 workers (``--scheduler``) with 2
   and 4 shards, after P, P + 1 and (for information) P + 2 passes. Scored by the reported
   holdout loss (the same held-out examples as one machine) and by ``olcli test`` on the
   test part. Target: the cluster's loss after at most P + 1 passes <= 1.02 x one
   machine's after P.
2. Speed. ``python -m olcli.datagen click --lines 2000000`` (one pass, logistic): one
   machine (``olcli train``), ``--workers 1 --shards 2`` and ``--workers 2 --shards 2``,
   alternating, ROUNDS rounds. The wall time of the training is the report's
   ``elapsed_seconds`` (the passes, after the cluster is up); the cluster's start-up
   (processes, connection, olcli loaded on the workers) is ``scale_out.startup_seconds``,
   reported apart. The load average is recorded before every run: the target (2 workers
   >= 1.6 x faster) is only measurable on an idle machine.
3. Merge cost: ``Learner.merge`` of two learners and their model-file encoding, at -b 18,
   22 and 24 (AdaGrad, 3 state slots), for the estimate in docs/scaling-out.md.
4. Rule: covtype on 4 shards pass after pass, AdaGrad and --gd, with olcli's merge (G grows
   by the increments' weighted mean), with the sum of the increments, and with VW's G
   (written here only): what the accumulators' rule does to the loss of 1.
5. Members: the text generator on one machine and on 4 shards pass after pass, the test loss
   of the default mixture and of each of its members inside it, and its weights: which
   member the mixture follows after merges, and how each member's merge fares.
6. Coin: --coin alone on the three sets, one machine and 2 and 4 shards pass after pass, with
   olcli's merge (coin.merge) and the other rules of COIN_RULES (variants written here only):
   test and holdout loss after each pass.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness

PASSES = 3
ROUNDS = 3


def load() -> str:
    return f"{harness.load_average():.2f}"


def olcli(*args, check=True) -> harness.Measured:
    return harness.run_olcli(args, check=check, separate_stderr=True)


def report(path) -> dict:
    return json.loads(Path(path).read_text())


def split(source: Path, train: Path, test: Path, train_lines: int) -> None:
    with open(source, "rb") as f:
        lines = f.readlines()
    train.write_bytes(b"".join(lines[:train_lines]))
    test.write_bytes(b"".join(lines[train_lines:]))


def datasets(data: Path, work: Path) -> dict:
    out = {"a9a": (data / "a9a" / "train.vw", data / "a9a" / "test.vw")}
    split(data / "covtype_binary_20k" / "train.vw", work / "covtype_train.vw", work / "covtype_test.vw", 16000)
    out["covtype"] = (work / "covtype_train.vw", work / "covtype_test.vw")
    text = work / "text.vw"
    subprocess.run([sys.executable, "-m", "olcli.datagen", "text", "--lines", "240000", "--seed", "11",
                    "-o", str(text)], check=True)
    split(text, work / "text_train.vw", work / "text_test.vw", 200000)
    out["text"] = (work / "text_train.vw", work / "text_test.vw")
    return out


def test_loss(model: Path, test: Path, work: Path) -> float:
    olcli("test", test, "-i", model, "--quiet", "--report", work / "test.json")
    return report(work / "test.json")["average_loss"]


def losses(sets: dict, work: Path, scheduler: str) -> list:
    rows = []
    for name, (train, test) in sets.items():
        base = [train, "--loss", "logistic", "--quiet"]
        olcli("train", *base, "--passes", PASSES, "-f", work / "single.olm", "--report", work / "single.json",
              "--cache", work / f"{name}.cache", "-k")
        single = report(work / "single.json")
        row = {"data": name, "single_holdout": single["average_loss"], "single_passes": single["passes"],
               "single_test": test_loss(work / "single.olm", test, work)}
        for shards in (2, 4):
            for passes in (PASSES, PASSES + 1, PASSES + 2):
                olcli("train", *base, "--passes", passes, "-f", work / "spread.olm", "--report", work / "spread.json",
                      "--scheduler", scheduler, "--shards", shards)
                spread = report(work / "spread.json")
                row[(shards, passes)] = (spread["average_loss"], test_loss(work / "spread.olm", test, work),
                                         spread["passes"])
        rows.append(row)
        print(f"loss {name}: {row}", file=sys.stderr)
    return rows


def speed(work: Path) -> tuple:
    click = work / "click.vw"
    subprocess.run([sys.executable, "-m", "olcli.datagen", "click", "--lines", "2000000", "-o", str(click)],
                   check=True)
    configs = {"one machine (olcli train)": [],
               "--workers 1 --shards 2": ["--workers", 1, "--shards", 2],
               "--workers 2 --shards 2": ["--workers", 2, "--shards", 2]}
    runs = {name: [] for name in configs}
    olcli("train", click, "--loss", "logistic", "--quiet")  # warm the page cache and the kernels
    for _ in range(ROUNDS):
        for name, extra in configs.items():
            before = load()
            process = olcli("train", click, "--loss", "logistic", "--quiet", "-f", work / "c.olm", "--report",
                            work / "c.json", *extra).wall
            r = report(work / "c.json")
            scale = r.get("scale_out") or {}
            runs[name].append({"train": r["elapsed_seconds"], "startup": scale.get("startup_seconds"),
                               "process": process, "load": before, "loss": r["average_loss"],
                               "tasks": sum(p["task_seconds"] for p in scale.get("passes", [])),
                               "merges": sum(p["merge_seconds"] for p in scale.get("passes", []))})
            print(f"speed {name}: {runs[name][-1]}", file=sys.stderr)
    return runs, click.stat().st_size


def merge_cost() -> list:
    from olcli.learner import Learner

    rows = []
    lines = [f"{1 if k % 3 else -1} |a a{k % 1000} |b b{(k * 7919) % 100000} |c c{k % 37}" for k in range(20000)]
    for bits in (18, 22, 24):
        base = Learner(loss="logistic", bits=bits)
        base.learn(lines[:10])
        shards = []
        for k in range(2):
            shard = base.copy()
            shard.learn(lines[k::2])
            shards.append(shard)
        started = time.perf_counter()
        raw = shards[0].to_bytes()
        encode = time.perf_counter() - started
        started = time.perf_counter()
        Learner.from_bytes(raw)
        decode = time.perf_counter() - started
        started = time.perf_counter()
        merged = Learner.merge(shards, base=base)
        merge = time.perf_counter() - started
        assert merged.model.pool.all_finite()
        pool = merged.model.pool   # the rows the shards touched (olcli/row_pool.py RowPool), not 2^bits
        rows.append({"bits": bits, "table_mb": pool.used * pool.group * pool.slots * pool.state.itemsize / 1e6, "file_mb": len(raw) / 1e6,
                     "encode": encode, "decode": decode, "merge": merge})
        print(f"merge {rows[-1]}", file=sys.stderr)
        del base, shards, merged, raw
    return rows


def _vw_adagrad_merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """VW's accumulate_weighted_avg for AdaGrad (benchmarks/results/merge_rules.md): w the
    mean weighted by each shard's total G_k, G = sum G_k^2 / sum G_k. Not olcli's rule."""
    import numpy as np

    from olcli.engine import adagrad, merge_common

    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    totals = merge_common.column(shards, active, adagrad.G)
    weights = merge_common.weights_where(adagrad.all_weights, shards, active, params, shard_rounds, totals > 0)
    w, total = merge_common.weighted_mean(weights, totals)
    updated = (totals - base[:, adagrad.G]).sum(axis=0) > 0
    out = np.array(base, copy=True)
    out[updated, adagrad.W] = w[updated]
    out[updated, adagrad.G] = ((totals ** 2).sum(axis=0) / np.where(total > 0, total, 1.0))[updated]
    return out


def rule(data: Path, work: Path, shards: int = 4, passes: int = 5) -> dict:
    """covtype on 4 shards, pass after pass, for AdaGrad and --gd: olcli's merge (G grows by
    the increments' weighted mean), the sum of the increments (olcli's rule before 2026-11)
    and, for AdaGrad, VW's G (scaleout's own shard and merge tasks, run here without a
    cluster; no holdout): test loss by pass, and one machine's."""
    from olcli import scaleout
    from olcli.engine import adagrad, merge_common
    from olcli.learner import Learner

    train, test = work / "covtype_train.vw", work / "covtype_test.vw"
    split(data / "covtype_binary_20k" / "train.vw", train, test, 16000)
    test_lines = test.read_bytes()
    own_merge, own_increment = adagrad.merge, merge_common.mean_increment

    def summed(grown, total):
        return total

    found = {}
    try:
        for algorithm in ("adagrad", "gd"):
            variants = [("one machine", own_merge, own_increment, 1), ("olcli's rule", own_merge, own_increment, shards),
                        ("sum of increments", own_merge, summed, shards)]
            if algorithm == "adagrad":
                variants.append(("VW's G", _vw_adagrad_merge, own_increment, shards))
            for name, merge, increment, count in variants:
                adagrad.merge, merge_common.mean_increment = merge, increment
                learner = Learner(algorithm, loss="logistic")
                learner.decide_format("vw", str(train))
                cut = scaleout.cut_shards([str(train)], count)
                key = f"{algorithm}: {name}"
                found[key] = []
                for number in range(1, passes + 1):
                    state = learner.to_bytes()
                    parts = [scaleout.learn_shard(state, scaleout.Job(shard, number)) for shard in cut]
                    learner = Learner.from_bytes(
                        scaleout.tree(parts, lambda a, b: scaleout.merge_parts(state, a, b)).model)
                    found[key].append(learner.copy().evaluate(test_lines).loss)
    finally:
        adagrad.merge, merge_common.mean_increment = own_merge, own_increment
    print(f"rule {found}", file=sys.stderr)
    return found


def members(work: Path, shards: int = 4, passes: int = 5) -> dict:
    """The text generator (as in part 1) on one machine and on ``shards`` shards, pass after
    pass, with the default holdout (every 10th example): the test loss of the default
    mixture and of each of its members inside it (the member's own predictor: the mixture
    with all its weight on that member), and the mixture's weights. The shard and merge
    tasks of olcli/shard_tasks.py run in the benchmark's process (no cluster; the same
    functions the workers run), the holdout offsets from the shards' line counts."""
    import numpy as np

    from olcli.engine import mixture

    train, test = _text_split(work)
    test_lines, data = test.read_bytes(), train.read_bytes()
    found = {}
    for count in (1, shards):
        rows = []
        for number, learner, _ in _sharded_passes("mix", train, data, count, passes):
            losses = learner.model.scalars[mixture.LOSSES:mixture.LOSSES + mixture.N_MEMBERS]
            pi = np.array(mixture.PRIOR) * np.exp(-(losses - losses.min()))
            row = {"mix": learner.copy().evaluate(test_lines).loss, "weights": (pi / pi.sum()).tolist()}
            for k, member in enumerate(mixture.MEMBERS):
                alone = learner.copy()
                alone.model.scalars[mixture.LOSSES:mixture.LOSSES + mixture.N_MEMBERS] = 1e9
                alone.model.scalars[mixture.LOSSES + k] = 0.0
                row[member] = alone.evaluate(test_lines).loss
            rows.append(row)
            print(f"members {count} shards, pass {number}: {row}", file=sys.stderr)
        found["one machine" if count == 1 else f"{count} shards"] = rows
    return found


def _text_split(work):
    """The text generator's 240,000 lines (seed 11) split 200,000 / 40,000, written once."""
    train, test = work / "text_train.vw", work / "text_test.vw"
    if not train.exists():
        text = work / "text.vw"
        subprocess.run([sys.executable, "-m", "olcli.datagen", "text", "--lines", "240000", "--seed", "11",
                        "-o", str(text)], check=True)
        split(text, train, test, 200000)
    return train, test


def _sharded_passes(algorithm, train, data, count, passes):
    """(pass number, learner after it, the pass's holdout loss) for ``passes`` passes over
    ``train`` (its bytes ``data``) cut into ``count`` shards, each pass learned in this
    process by the cluster's own task and merge functions (scaleout.learn_shard,
    merge_parts, tree)."""
    from olcli import scaleout
    from olcli.learner import Learner

    learner = Learner(algorithm, loss="logistic")
    learner.decide_format("vw", str(train))
    cut = scaleout.cut_shards([str(train)], count)
    lines = [data[c.start:len(data) if c.end is None else c.end].count(b"\n") for c in cut]
    for number in range(1, passes + 1):
        state = learner.to_bytes()
        parts, before = [], 0
        for shard, n in zip(cut, lines):
            parts.append(scaleout.learn_shard(state, scaleout.Job(shard, number, first_line=before + 1,
                                                                   holdout=10, holdout_offset=before % 10)))
            before += n
        merged = scaleout.tree(parts, lambda a, b: scaleout.merge_parts(state, a, b))
        base, learner = learner, Learner.from_bytes(merged.model)
        scaleout.finish_pass(base, learner, merged, number == 1)
        yield number, learner, merged.holdout[0] / merged.holdout[1] if merged.holdout[1] > 0 else float("nan")


COIN_RULES = {
    "olcli's merge": "coin.merge: Z and G the union's sums, the wealth the richest contributing shard's, "
                     "the weight that bettor's bet",
    "pooled wealth": "the same with the wealth the dG-weighted mean of the shards' (one stake split between "
                     "the K games)",
    "wealth added": "the same with the wealth the base's plus the shards' increments (the winnings added)",
    "wealth compounded": "the same with alpha + wealth the base's times the shards' ratios (the gains compounded)",
    "averaged weight": "the rule before 2026-11-25: w the dG-weighted mean of the shards' weights, the bettor "
                       "rebuilt to hold it with the shards' mean fraction |Z|/(LM + G)",
}


def _coin_variant(name: str, own=None):
    """coin.merge (``own``, by default the module's) with the wealth (or the whole rule)
    swapped, for the 'coin' part; written here only. Z, G, M, L as coin.merge; the stored
    weight the bet of the resulting bettor over the merged A, except "averaged weight" (the
    previous rule, in full)."""
    import numpy as np

    from olcli.engine import coin, merge_common

    own = coin.merge if own is None else own
    if name == "olcli's merge":
        return own

    def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None,
              shard_scalars=None):
        out = own(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars, shard_scalars)
        result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
        if result is not None:
            return out
        alpha = params[coin.P_ALPHA]
        touched = np.stack([(shards[k] != base).any(axis=1) for k in active])
        changed = touched.any(axis=0)
        grown = np.maximum(np.where(touched, merge_common.column(shards, active, coin.G) - base[:, coin.G], 0.0),
                           0.0)
        wealths = merge_common.column(shards, active, coin.WEALTH)
        scalars = coin.merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights)
        average = (scalars[coin.NORM_X_SUM] + 1e-6) / scalars[coin.TOTAL_WEIGHT]
        lm = out[:, coin.L] * out[:, coin.M]
        with np.errstate(divide="ignore", invalid="ignore"):
            if name == "averaged weight":
                fractions = np.stack([np.abs(shards[k][:, coin.Z]) / (shards[k][:, coin.L] * shards[k][:, coin.M]
                                                                       + shards[k][:, coin.G]) for k in active])
                fractions = np.where(np.isfinite(fractions), fractions, 0.0)
                w, total = merge_common.weighted_mean(merge_common.column(shards, active, coin.W), grown)
                fraction, _ = merge_common.weighted_mean(fractions, grown)
                mean_wealth, _ = merge_common.weighted_mean(wealths, grown)
                fallback = total <= 0.0
                w = np.where(fallback, np.where(touched, merge_common.column(shards, active, coin.W), 0.0).sum(axis=0)
                             / np.maximum(touched.sum(axis=0), 1), w)
                bets = (w != 0.0) & (fraction > 0.0) & (lm > 0.0) & ~fallback
                z = np.where(bets, np.copysign(fraction * (lm + out[:, coin.G]), w), 0.0)
                wealth = np.where(bets, np.abs(w) * average * lm / fraction - alpha, mean_wealth)
                out[changed, coin.W], out[changed, coin.Z] = w[changed], z[changed]
                out[changed, coin.WEALTH] = wealth[changed]
                return out
            if name == "pooled wealth":
                wealth, total = merge_common.weighted_mean(wealths, grown)
                wealth = np.where(total > 0.0, wealth, out[:, coin.WEALTH])
            elif name == "wealth added":
                wealth = base[:, coin.WEALTH] + np.where(touched, wealths - base[:, coin.WEALTH], 0.0).sum(axis=0)
            else:  # wealth compounded
                ratios = np.where(touched, (alpha + wealths) / (alpha + base[:, coin.WEALTH]), 1.0)
                wealth = (alpha + base[:, coin.WEALTH]) * ratios.prod(axis=0) - alpha
            # a bettor never holds a wealth <= 0 (alpha + wealth): keep the richest shard's there
            wealth = np.where(alpha + wealth > 0.0, wealth, out[:, coin.WEALTH])
            denominator = lm * (lm + out[:, coin.G])
            bet = np.where(denominator >= coin.TINY, (alpha + wealth) / denominator * out[:, coin.Z], 0.0)
        out[changed, coin.WEALTH] = wealth[changed]
        out[changed, coin.W] = bet[changed] / average
        return out

    return merge


def coin_rules(data: Path, work: Path, passes: int = 5) -> dict:
    """--coin alone on the text generator (as in part 1), a9a and covtype (as in part 1),
    one machine and 2 and 4 shards, pass after pass (holdout every 10th example, no early
    stop, the shard and merge tasks in this process), with olcli's merge and the other
    rules of COIN_RULES: (test loss, holdout loss) after each pass."""
    from olcli.engine import coin

    text_train, text_test = _text_split(work)
    covtype_train, covtype_test = work / "covtype_train.vw", work / "covtype_test.vw"
    split(data / "covtype_binary_20k" / "train.vw", covtype_train, covtype_test, 16000)
    shuffled = work / "text_shuffled.vw"   # does the split order matter? the same lines, shuffled
    lines = text_train.read_bytes().splitlines(keepends=True)
    random.Random(5).shuffle(lines)
    shuffled.write_bytes(b"".join(lines))
    sets = {"text": (text_train, text_test), "a9a": (data / "a9a" / "train.vw", data / "a9a" / "test.vw"),
            "covtype": (covtype_train, covtype_test), "text, lines shuffled": (shuffled, text_test)}
    own = coin.merge
    found = {}
    try:
        for dataset, (train, test) in sets.items():
            test_lines, lines = test.read_bytes(), train.read_bytes()
            runs = [("one machine", 1)] + [(name, count) for count in (2, 4) for name in COIN_RULES
                                           if not dataset.startswith("text, ")
                                           or (count == 4 and name in ("olcli's merge", "averaged weight"))]
            for name, count in runs:
                coin.merge = own if count == 1 else _coin_variant(name, own)
                key = f"{dataset}: {name}" if count == 1 else f"{dataset}: {count} shards, {name}"
                found[key] = [(learner.copy().evaluate(test_lines).loss, holdout)
                              for _, learner, holdout in _sharded_passes("coin", train, lines, count, passes)]
                print(f"coin {key}: {found[key]}", file=sys.stderr)
    finally:
        coin.merge = own
    return found


def _default() -> str:
    from olcli.engine import registry

    return registry.DEFAULT_ALGORITHM


def write(out: Path, loss_rows: list, runs: dict, click_bytes: int, merges: list, loads: tuple,
          rules: dict | None = None, found_members: dict | None = None, coins: dict | None = None) -> None:
    lines = ["# Training on a Dask cluster: loss against one machine, speed-up, merge cost", "",
             f"`python -m benchmarks.scale_out` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}). Machine: "
             f"{os.cpu_count()} cores, shared with other jobs: load average {loads[0]} before the speed runs, "
             f"{loads[1]} after. Local Dask cluster of worker processes with one thread each, on 127.0.0.1. "
             "Raw numbers in scale_out.json.", "",
             "## Loss after P passes: 2 and 4 shards against one machine", "",
             f"Logistic loss, the default algorithm (`{_default()}`), `--passes {PASSES}` (and {PASSES + 1}) with the default "
             "holdout (every 10th example, the same examples on the cluster as on one machine) and early stop. "
             "`holdout` is the reported loss (the best pass's holdout loss); `test` is `olcli test` of the "
             "final model on the test part. Ratio = cluster / one machine after "
             f"{PASSES} passes; target: <= 1.02 after at most {PASSES + 1} passes.", "",
             "| data | run | passes run | holdout loss | test loss | holdout ratio | test ratio |",
             "|---|---|---:|---:|---:|---:|---:|"]
    verdicts = []
    for row in loss_rows:
        lines.append(f"| {row['data']} | one machine, {PASSES} passes | {row['single_passes']} | "
                     f"{row['single_holdout']:.4f} | {row['single_test']:.4f} | 1 | 1 |")
        for shards in (2, 4):
            best = None
            for passes in (PASSES, PASSES + 1, PASSES + 2):
                holdout, test, ran = row[(shards, passes)]
                h, t = holdout / row["single_holdout"], test / row["single_test"]
                if passes <= PASSES + 1:
                    best = (h, t) if best is None else (min(best[0], h), min(best[1], t))
                lines.append(f"| {row['data']} | {shards} shards, {passes} passes"
                             f"{' (beyond the target)' if passes > PASSES + 1 else ''} | {ran} | {holdout:.4f} | "
                             f"{test:.4f} | {h:.4f} | {t:.4f} |")
            verdicts.append(f"{row['data']}, {shards} shards: best ratio within {PASSES + 1} passes "
                            f"{best[0]:.4f} (holdout), {best[1]:.4f} (test): "
                            f"{'met' if max(best) <= 1.02 else 'NOT met'}")
    lines += ["", *[f"- {v}" for v in verdicts], "",
              "## The accumulators' growth at a merge, on covtype with 4 shards", "",
              "covtype (16,000 train, 4,000 test), 4 shards, the shard and merge tasks of olcli/shard_tasks.py run "
              "in the benchmark's process, no holdout; test loss after each pass. `olcli's rule`: G grows by the "
              "shards' increments' weighted mean, sum dG_k^2 / sum dG_k (merge_common.mean_increment), and for "
              "--gd the merged move is lengthened to sqrt(n) times the mean's on rows the base had learned "
              "(gd.merge 3b, since 2026-11-27; n = sum dG_k / that increment); `sum of "
              "increments`: G = G_base + sum dG_k (olcli's rule before 2026-11, swapped in here; for --gd it "
              "also turns 3b off, n = 1); `VW's G`: "
              "VW's accumulate_weighted_avg (w weighted by the totals G_k, G = sum G_k^2 / sum G_k), written in "
              "this script only.", "",
              "| run | " + " | ".join(f"pass {k + 1}" for k in range(len(next(iter((rules or {"": [0]}).values()))))) + " |",
              "|---|" + "---:|" * len(next(iter((rules or {"": [0]}).values())))]
    for name, found in (rules or {}).items():
        lines.append(f"| {name} | " + " | ".join(f"{x:.4f}" for x in found) + " |")
    if rules:
        lines.append("")
        for algorithm in ("adagrad", "gd"):
            one = rules[f"{algorithm}: one machine"][PASSES - 1]
            ratios = ", ".join(f"{name.split(': ')[1]} {found[PASSES] / one:.4f}" for name, found in rules.items()
                               if name.startswith(algorithm + ":") and not name.endswith("one machine"))
            lines.append(f"- {algorithm}, after {PASSES + 1} passes against one machine after {PASSES}: {ratios}")
    if found_members:
        one = found_members["one machine"]
        names = [k for k in one[0] if k not in ("mix", "weights")]   # the members of the run's default
        lines += ["", "## The text generator on 4 shards: the mixture and its members, pass after pass", "",
                  "The text generator as in the loss table (200,000 train, 40,000 test), holdout every 10th "
                  "example, no early stop; the shard and merge tasks of olcli/shard_tasks.py run in the benchmark's "
                  "process. Test loss of the default mixture and of each member inside it (its own predictor), "
                  f"and the mixture's weights ({', '.join(names)}) after the pass. The mixture counts only "
                  "losses of examples not learned yet (olcli/engine/mixture.py), so it follows the member whose "
                  "held-out loss is lowest; the last line compares each member on 4 shards after P + 1 passes "
                  f"with itself on one machine after P = {PASSES}. benchmarks/mix_members.py gives the same "
                  "for any set, with the members' cumulative losses.", "",
                  "| run | pass | mix | " + " | ".join(names) + " | weights |",
                  "|---|---:|---:|" + "---:|" * len(names) + "---|"]
        for name, rows in found_members.items():
            for number, row in enumerate(rows, 1):
                lines.append(f"| {name} | {number} | {row['mix']:.4f} | "
                             + " | ".join(f"{row[m]:.4f}" for m in names)
                             + f" | {', '.join(f'{w:.3f}' for w in row['weights'])} |")
        for name, rows in found_members.items():
            if name != "one machine" and len(rows) > PASSES:
                ratios = ", ".join(f"{m} {rows[PASSES][m] / one[PASSES - 1][m]:.4f}" for m in ["mix"] + names)
                lines.append(f"\n- {name} after {PASSES + 1} passes against one machine after {PASSES}: {ratios}")
    if coins and isinstance(next(iter(coins.values()))[0], (list, tuple)):
        lines += ["", "## --coin's merge: the rules tried", "",
                  "--coin alone (on the text generator the default mixture follows it: the table above), the "
                  "data as in the loss table, holdout every 10th example, no early stop, the shard and merge tasks "
                  "of olcli/scaleout.py in the benchmark's process. Each cell: test loss / holdout loss after "
                  "the pass. The rules (all but the last written in this script only as variants of coin.merge):",
                  "", *[f"- `{name}`: {text}" for name, text in COIN_RULES.items()], "",
                  "| data | run | " + " | ".join(f"pass {k + 1}" for k in range(len(next(iter(coins.values())))))
                  + " |", "|---|---|" + "---:|" * len(next(iter(coins.values())))]
        for key, found in coins.items():
            dataset, run = key.split(": ", 1)
            lines.append(f"| {dataset} | {run} | " + " | ".join(f"{t:.4f} / {h:.4f}" for t, h in found) + " |")
        lines += ["", f"Best within {PASSES + 1} passes against one machine's best within {PASSES} (test, holdout):",
                  "", "| data | shards | " + " | ".join(COIN_RULES) + " |", "|---|---:|" + "---|" * len(COIN_RULES)]
        for dataset in dict.fromkeys(key.split(": ")[0] for key in coins):
            one = coins[f"{dataset}: one machine"][:PASSES]
            best_one = (min(t for t, _ in one), min(h for _, h in one))
            for count in (2, 4):
                cells = []
                for name in COIN_RULES:
                    if f"{dataset}: {count} shards, {name}" not in coins:
                        cells.append("")
                        continue
                    cluster = coins[f"{dataset}: {count} shards, {name}"][:PASSES + 1]
                    test, holdout = min(t for t, _ in cluster) / best_one[0], min(h for _, h in cluster) / best_one[1]
                    mark = "**" if max(test, holdout) <= 1.02 else ""
                    cells.append(f"{mark}{test:.3f}, {holdout:.3f}{mark}")
                if any(cells):
                    lines.append(f"| {dataset} | {count} | " + " | ".join(cells) + " |")
        lines += ["", "Bold: both within 1.02. `text, lines shuffled`: the text generator's training lines in a "
                  "random order (seed 5), so that every shard is a sample of the whole: whether the split order "
                  "matters."]
    lines += ["", "## Wall speed-up with 2 workers", "",
              f"`python -m olcli.datagen click --lines 2000000` ({click_bytes / 1e6:.0f} MB), one pass, logistic; "
              f"{ROUNDS} rounds, the configurations alternating. `train s` = the report's `elapsed_seconds` (the "
              "pass, cluster already up); `start-up s` = the cluster's start (processes, connection, olcli loaded on "
              "the workers), apart; `process s` = the whole command; `tasks s`/`merges s` = time inside the shard "
              "and merge tasks, summed over tasks; `load` = 1-minute load average just before the run.", "",
              "| configuration | train s, median (runs) | start-up s | process s | tasks s | merges s | load before | "
              "progressive loss |", "|---|---|---:|---:|---:|---:|---|---:|"]
    medians = {}
    for name, found in runs.items():
        train = [r["train"] for r in found]
        medians[name] = statistics.median(train)
        startup = [r["startup"] for r in found if r["startup"] is not None]
        cells = [name, f"{medians[name]:.2f} ({', '.join(f'{x:.2f}' for x in train)})",
                 f"{statistics.median(startup):.2f}" if startup else "-",
                 f"{statistics.median(r['process'] for r in found):.2f}",
                 f"{statistics.median(r['tasks'] for r in found):.2f}",
                 f"{statistics.median(r['merges'] for r in found):.2f}",
                 ", ".join(r["load"] for r in found), f"{found[0]['loss']:.4f}"]
        lines.append("| " + " | ".join(cells) + " |")
    one, two, single = medians["--workers 1 --shards 2"], medians["--workers 2 --shards 2"], \
        medians["one machine (olcli train)"]
    busy = [float(r["load"]) for found in runs.values() for r in found]
    lines += ["", f"- speed-up of 2 workers over 1 worker (same shards, same model): {one / two:.2f}x "
                  f"(target >= 1.6: {'met' if one / two >= 1.6 else 'NOT met'})"
              + (f"; NOT MEASURABLE here: the load average before the runs was {min(busy):.1f}-{max(busy):.1f} "
                 f"on {os.cpu_count()} cores (other jobs), so two workers did not get two cores"
                 if statistics.median(busy) > os.cpu_count() else ""),
              f"- 2 workers against one machine's `olcli train` (which already overlaps reading, parsing and "
              f"learning on both cores): {single / two:.2f}x", "",
              "## Merge cost (one machine, for the paper estimate)", "",
              "`Learner.merge` of two AdaGrad learners (w, G, last: 3 float64 slots per row) from a common base, "
              "and one learner's model file (`to_bytes`, `from_bytes`); touched rows MB: the merged "
              "model's row pool (the rows the shards touched; the table's other rows cost nothing).", "",
              "| -b | touched rows MB | model file MB | encode s | decode s | merge s |", "|---:|---:|---:|---:|---:|---:|"]
    for m in merges:
        lines.append(f"| {m['bits']} | {m['table_mb']:.2f} | {m['file_mb']:.1f} | {m['encode']:.3f} | "
                     f"{m['decode']:.3f} | {m['merge']:.3f} |")
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    """``--parts loss,speed,merge`` (default all) measures only those parts and takes the
    others from the previous run's raw results (OUT with .json), e.g. to measure the speed
    again when the machine is quiet."""
    every = ("loss", "speed", "merge", "rule", "members", "coin")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", default=harness.DATA, help="the data folder (default: harness.DATA)")
    parser.add_argument("--out", default=str(Path(harness.RESULTS) / "scale_out.md"), help="the results table")
    parser.add_argument("--parts", default=",".join(every),
                        help=f"comma-separated parts to measure ({','.join(every)}); the others come from OUT's .json")
    args = parser.parse_args()
    out, data, parts = Path(args.out), Path(args.data), set(args.parts.split(","))
    unknown = parts - set(every)
    if unknown:
        parser.error(f"unknown part(s) {', '.join(sorted(unknown))} (one of {', '.join(every)})")
    raw = out.with_suffix(".json")
    saved = json.loads(raw.read_text()) if raw.exists() and parts != set(every) else {}
    start_load = load()
    with tempfile.TemporaryDirectory(prefix="olcli-scale-out-") as tmp:
        work = Path(tmp)
        if "loss" in parts:
            from distributed import Client, LocalCluster

            sets = datasets(data, work)
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address="127.0.0.1:0", silence_logs=50) as cluster, \
                    Client(cluster, set_as_default=False):
                rows = losses(sets, work, cluster.scheduler_address)
            saved["loss"] = [{k if isinstance(k, str) else f"{k[0]}x{k[1]}": v for k, v in row.items()}
                             for row in rows]
        if "speed" in parts:
            saved["speed"], saved["click_bytes"] = speed(work)
            saved["speed_loads"] = [start_load, load()]
    if "merge" in parts:
        saved["merge"] = merge_cost()
    if "rule" in parts:
        with tempfile.TemporaryDirectory(prefix="olcli-scale-out-") as tmp:
            saved["rule"] = rule(data, Path(tmp))
    if "members" in parts:
        with tempfile.TemporaryDirectory(prefix="olcli-scale-out-") as tmp:
            saved["members"] = members(Path(tmp))
    if "coin" in parts:
        with tempfile.TemporaryDirectory(prefix="olcli-scale-out-") as tmp:
            saved["coin"] = coin_rules(data, Path(tmp))
    raw.write_text(json.dumps(saved, indent=1) + "\n")
    loss_rows = [{(tuple(map(int, k.split("x"))) if "x" in k and k[0].isdigit() else k): v for k, v in row.items()}
                 for row in saved["loss"]]
    write(out, loss_rows, saved["speed"], saved["click_bytes"], saved["merge"], tuple(saved["speed_loads"]),
          saved.get("rule"), saved.get("members"), saved.get("coin"))
    print(out.read_text())


if __name__ == "__main__":  # the cluster's worker processes import this module again
    main()
