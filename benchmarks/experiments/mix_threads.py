"""Does learning the default mixture's members on separate threads pay on this machine? (issue 29 item 5)

    python -m benchmarks.experiments.mix_threads [--lines-click N] [--lines-text N] [--repeats R] [--out FILE]

A prototype of the kernels, not the product: the file is parsed once (outside the timing) into
chunks of CHUNK lines as ``olcli train`` reads them, and each chunk is learned

- sequentially: ``mixture.run_chunk``, today's default kernel (one thread);
- in two phases: first each member's pass over the chunk (``member_pass``: its predictions,
  clipped to the label range as in the mixture, and its learning, exactly as in
  mixture._run_binary), the --gd member on one thread and --coin then ScInOL2 on another
  (numba nogil kernels from a thread pool), then the mixture's weights, predictions and
  accounting (``mix_pass``) on the members' predictions.

The members learn from their own predictions only (mixture.py), so the two orders give the same
bits: the script checks the progressive loss, every counter, scalar and the whole state table
for equality with the sequential run before timing. Reported: best of --repeats, kernel seconds
for the whole file, and the parallel bound (the slowest thread plus the mixing pass).
"""

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks.experiments.mix_rates import generate
from olcli.engine import coin, gd, mixture, scinol2
from olcli.engine.driver import account_binary, clip_prediction, progress_row, start_example, widen_label_range
from olcli.engine.jit import njit
from olcli.engine.records import C_ROUNDS, S_LOSS, S_WEIGHT
from olcli.learner import Learner

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 8192


@njit(nogil=True)
def plan(counters, scalars, settings, batch, holdout, learning_out, low_out, high_out):
    """The per-example facts every member needs, in the sequential order (on copies of the
    counters, scalars and holdout: mix_pass advances the real ones): whether it is learned
    from, and the clipping range after its label widened it (driver's rules)."""
    for e in range(len(batch.labels)):
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, settings.learn, h, y)
        if settings.learn and not np.isnan(y):
            widen_label_range(counters, settings, y)
            mixture.see_label(scalars, y)
        learning_out[e] = learning
        low_out[e] = clip_prediction(-np.inf, counters, settings)
        high_out[e] = clip_prediction(np.inf, counters, settings)


@njit(nogil=True)
def member_pass(k, table, settings, member_settings, batch, learning, low, high, out):
    """Member k's predictions (clipped) and learning over the chunk, as in mixture._run_binary."""
    index, value = batch.index, batch.value
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        base = batch.base[e]
        if k == 0:
            p = base + gd.predict(table, member_settings, index, value, lo, hi, 0, learning[e], h)
        elif k == 1:
            p = base + coin.predict(table, member_settings, index, value, lo, hi, 0, learning[e], h)
        else:
            p = base + scinol2.predict(table, member_settings, index, value, lo, hi, 0, learning[e], h)
        p = min(max(p, low[e]), high[e])
        out[e] = p
        if learning[e]:
            if k == 0:
                mixture._learn_member(gd.update, table, member_settings, settings, index, value, lo, hi, 0, p, y, h)
            elif k == 1:
                mixture._learn_member(coin.update, table, member_settings, settings, index, value, lo, hi, 0, p,
                                      y, h)
            else:
                mixture._learn_member(scinol2.update, table, member_settings, settings, index, value, lo, hi, 0,
                                      p, y, h)


@njit(nogil=True)
def mix_pass(table, settings, batch, tally, learning, members, predictions):
    """The mixture's part of mixture._run_binary, given the members' clipped predictions."""
    counters, scalars = table.counters, table.scalars
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    pi = np.empty(mixture.N_MEMBERS)
    member = np.empty(mixture.N_MEMBERS)
    n_rows = np.int64(0)
    for e in range(len(batch.labels)):
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learn_e = start_example(holdout, learn, h, y)
        if learn and not np.isnan(y):
            widen_label_range(counters, settings, y)
            mixture.see_label(scalars, y)
        mixture.mixture_weights(scalars, mixture.mixing_rate(settings, scalars), pi)
        p = 0.0
        for k in range(mixture.N_MEMBERS):
            member[k] = members[k, e]
            p += pi[k] * member[k]
        p = clip_prediction(p, counters, settings)
        predictions[e] = p
        labeled = account_binary(tally, counters, settings, held_out, batch.feature_count[e], y, h, p)
        if mixture.counts_loss(holdout, learn, held_out, learn_e, h, y):
            mixture._count_losses(scalars, settings, member, y, h)
        if labeled and learn_e:
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, p, batch.feature_count[e])
    return n_rows


def parsed(path):
    learner = Learner("mix", loss="logistic", bits=18)
    with open(path, "rb") as handle:
        lines = handle.read().splitlines()
    return [learner.to_batch(lines[i:i + CHUNK])[0] for i in range(0, len(lines), CHUNK)]


def sequential(batches):
    learner = Learner("mix", loss="logistic", bits=18)
    start = time.perf_counter()
    for batch in batches:
        learner.process(batch, True)
    return time.perf_counter() - start, learner


def two_phase(batches, pool):
    """(seconds: total, member phase, mixing phase, plan; learner) of the two-phase order."""
    learner = Learner("mix", loss="logistic", bits=18)
    table, settings = learner.table(), learner.settings(True)
    t_gd, s_gd, t_coin, s_coin, t_sc, s_sc = mixture_members(table, settings)
    tally = learner.tally
    times = np.zeros(3)
    start = time.perf_counter()
    for batch in batches:
        n = len(batch.labels)
        learning, low, high = np.empty(n, np.bool_), np.empty(n), np.empty(n)
        members = np.empty((mixture.N_MEMBERS, n))
        t0 = time.perf_counter()
        plan(table.counters.copy(), table.scalars.copy(), settings, batch, tally.holdout.copy(), learning, low,
             high)
        t1 = time.perf_counter()
        futures = [pool.submit(member_pass, 0, t_gd, settings, s_gd, batch, learning, low, high, members[0]),
                   pool.submit(_coin_then_scinol2, t_coin, s_coin, t_sc, s_sc, settings, batch, learning, low, high,
                               members)]
        for f in futures:
            f.result()
        t2 = time.perf_counter()
        mix_pass(table, settings, batch, tally, learning, members, np.empty(n))
        t3 = time.perf_counter()
        times += (t1 - t0, t2 - t1, t3 - t2)
    return time.perf_counter() - start, times, learner


def _coin_then_scinol2(t_coin, s_coin, t_sc, s_sc, settings, batch, learning, low, high, members):
    member_pass(1, t_coin, settings, s_coin, batch, learning, low, high, members[1])
    member_pass(2, t_sc, settings, s_sc, batch, learning, low, high, members[2])


def mixture_members(table, settings):
    return _members_kernel(table, settings)


@njit
def _members_kernel(table, settings):
    return mixture._members(table, settings)


def same(a, b):
    ma, mb = a.model, b.model
    return (a.tally.stats[S_LOSS] == b.tally.stats[S_LOSS] and a.tally.stats[S_WEIGHT] == b.tally.stats[S_WEIGHT]
            and np.array_equal(ma.state, mb.state) and np.array_equal(ma.scalars, mb.scalars)
            and np.array_equal(ma.counters, mb.counters))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="generated files: this share of their full size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "mix_threads.md"))
    args = parser.parse_args()
    tmp = os.path.join(tempfile.gettempdir(), "olcli_mix_rates")
    os.makedirs(tmp, exist_ok=True)
    load = os.getloadavg()[0]
    out = ["# The default mixture's members on two threads (prototype of issue 29 item 5)", "",
           f"`python -m benchmarks.experiments.mix_threads --scale {args.scale} --repeats {args.repeats}`; "
           f"load average at the start {load:.1f} (2 cores, shared with other sessions). Kernels alone (the "
           "file parsed once, outside the timing), chunks of 8,192 lines, best of the repeats; the two-phase "
           "order is checked bit for bit (loss, state table, scalars, counters) against the sequential one; the "
           "last column runs the same two phases with one worker thread (the cost of the order without the "
           "parallelism).", "",
           "| file | lines | sequential s | two threads s | ratio | plan s | members phase s | mixing s | "
           "same bits | two phases, one thread s |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    with ThreadPoolExecutor(2) as pool, ThreadPoolExecutor(1) as single:
        for kind in ("click", "text"):
            batches = parsed(generate(kind, args.scale, tmp))
            lines = sum(len(b.labels) for b in batches)
            sequential(batches[:1])
            two_phase(batches[:1], pool)   # compiled
            seq_best, par_best, one_best, parts, identical = np.inf, np.inf, np.inf, None, True
            two_phase(batches[:1], single)
            for _ in range(args.repeats):
                seconds, _, learner = two_phase(batches, single)   # the same two phases, one worker thread
                one_best = min(one_best, seconds)
                seconds, reference = sequential(batches)
                seq_best = min(seq_best, seconds)
                seconds, times, learner = two_phase(batches, pool)
                identical &= same(reference, learner)
                if seconds < par_best:
                    par_best, parts = seconds, times
            out.append(f"| {kind} | {lines} | {seq_best:.3f} | {par_best:.3f} | {par_best / seq_best:.2f} | "
                       f"{parts[0]:.3f} | {parts[1]:.3f} | {parts[2]:.3f} | {'yes' if identical else 'NO'} | {one_best:.3f} |")
            print(out[-1], flush=True)
    with open(args.out, "w") as handle:
        handle.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
