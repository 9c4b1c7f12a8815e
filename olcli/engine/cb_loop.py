"""VW's ``--cbify K`` event loop in one kernel call per chunk of lines (olcli/cb_sim.py drives it).

Per line n of the chunk (its hashed rows as the parser gives them, int32, the learner's constant at 2^bits and
read as VW's constant index ``I_CONSTANT``; values, VW's feature count, label 1..K or 0 = none, weight w), as
``cb_sim.Cbify.step`` does it with ``cb.CbExploreAdf`` (``placed`` = K, one weight copy per action, cb_type mtr):

1. action a's copy of row r is (r − (r & m)) + a, m = 2^⌈log2(K+1)⌉ − 1 (VW's
   cbify_adf_data::copy_example_to_adf; the kernel runs only where 2^bits > m, so no copy wraps round the
   table); its score s_a = Σ_j weight(row_aj) · x_j, summed in NumPy's pairwise order (``pairwise_sum``, so
   that the sums are NumPy's ``(w * x).sum()`` to the last bit). With I_BY_COPY (K < COPY_ACTIONS and
   bits <= COPY_BITS) the scores read each copy's stored w from a copy of them kept by groups of 2^width = m + 1
   hashed indices, so that the K copies of a row lie side by side: group g = h >> width (the copies of a row are
   one group) has slot ``slots[g]`` (0: none of its indices has a pool row, whose w are the never-touched
   row's, slot 0's), and index h's w is ``by_slot[slots[g] · 2^width + (h & m)]``. cb_sim.Cbify keeps them
   (``Cbify._weights_by_group``); the kernel writes the w of each row it learns into them, handing out slots
   as I_SLOTS_USED counts. Without it (the copy costs 8 · 2^width bytes a group learned in, and 4 bytes a group
   of the table) they read the pool's rows;
2. the actions ranked by (s_a, a) ascending; the PMF of the rule (VW 9.x ``explore_internal.h``):
   ``epsilon`` (RULE_EPSILON): ε/K each plus (1 − ε)/t on the t actions tied with the best (tied:
   |s − s_best| ≤ FLT_EPSILON·max(|s|, |s_best|)), or all (1 − ε) on the first with ``first_only``;
   ``first`` (RULE_FIRST): uniform while τ > 0, else all on the best; ``squarecb`` (RULE_SQUARECB):
   γ = gamma_scale · n^gamma_exponent (n = events learned), p_a = 1/(K + γ (s_a − s_best)) off the
   best, the rest on the best; for first and squarecb then the projection onto p ≥ ε/K
   (``enforce_minimum_probability``);
3. VW's draw (``sample_after_normalizing``): u = the first ``merand48`` value of seed app_seed + n
   (n: VW's example counter), the first ranked position whose running sum exceeds u·Σp;
4. the cost (loss0 if the drawn action is the label, else loss1; negated with flip_loss_sign); with a
   label and learning, mtr's update of the drawn action's copy: totals E += 1, A += K, target the cost,
   importance w / p · E / A (squarecb: p = 1 unless the drawn action is the last), as one example of
   the learner's own loop (``driver.run_binary``'s steps: holdout, label range, predict, clip, the
   progress sums, ``update``), its new features given pool rows in order of arrival (row_pool.RowPool), and
   the rows' w (which predict may rescale and update changes) copied into ``by_slot`` (all of it made again
   from the pool, ``refill``, after an update that may have folded --l1/--l2 into every stored w, ``gd.may_have_folded``);
   then n += 1 for squarecb, τ −= 1 for first.

The rule's state lives in ``istate`` (I_* slots), the run's sums in ``facc`` (F_*); the kernel returns
the lines it finished (fewer when a prediction diverged: I_DIVERGED is then 1 + that line). The oracle
is tests/naive_cb.py (``cbify``, step by step in tests/test_cb_sim.py).
"""

import numpy as np

from olcli.engine.jit import njit

from olcli.engine import gd
from olcli.engine.borrowed import borrowed, lend_settings, lend_table, lend_tally, release
from olcli.engine.driver import (account_binary, clip_prediction, most_features, progress_row, start_example,
                                 widen_label_range)
from olcli.engine.losses import loss_derivative
from olcli.engine.records import C_ROUNDS, S_DIVERGED
from olcli.engine.scinol_common import prefetch, prefetch_at

RULE_EPSILON, RULE_FIRST, RULE_SQUARECB = 0, 1, 2
# The scores ask for the w of the K copies of the feature AHEAD features on, and for the slot of the feature 2 AHEAD
# on (scinol_common.prefetch_at, hints that change no result), when ``by_slot`` is over PREFETCH_BYTES: the reads
# then wait on memory.
AHEAD = 8
PREFETCH_BYTES = 1 << 20
# The scores read the copy by groups (I_BY_COPY) for K below COPY_ACTIONS (at most 32 w, 256 bytes, a slot) and
# tables of at most COPY_BITS bits: beyond them it costs more memory than it saves time (commit 7e2692d).
COPY_ACTIONS, COPY_BITS = 32, 24
FLT_EPSILON = 1.1920929e-07

# istate slots (int64)
(I_COUNTER, I_APP_SEED, I_EXAMPLES, I_TOTAL_FEATURES, I_COSTS_SEEN, I_EVENTS_LEARNED, I_TAU, I_EVENT_SUM,
 I_ACTION_SUM, I_USED, I_BITS, I_RULE, I_FIRST_ONLY, I_LEARN, I_DIVERGED, I_CURRENT_FEATURES, I_CONSTANT,
 I_SLOTS_USED, I_BY_COPY) = range(19)
N_ISTATE = 19
# facc slots (float64): the run's sums and the rule's parameters
(F_LABELLED_WEIGHT, F_SUM_LOSS, F_SUM_COST, F_SUM_COST2, F_EPSILON, F_GAMMA_SCALE, F_GAMMA_EXPONENT,
 F_LOSS0, F_LOSS1, F_FLIP) = range(10)
N_FACC = 10


@njit
def _block(a, lo, n):
    """NumPy's pairwise_sum of at most 128 terms: below 8 in order from 0.0, else eight running sums
    combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the rest added in order."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit
def pairwise_sum(a, lo, n):
    """NumPy's pairwise sum of a[lo:lo+n] (numpy/_core/src/umath/loops_utils.h ``pairwise_sum``, the order
    of ``ndarray.sum`` on a contiguous float64 array): blocks of at most 128 terms (``_block``); above
    that the two halves, the first n2 = n//2 − (n//2 mod 8) long, summed apart and added (``pairwise_sum_in``,
    its stack allocated here)."""
    if n <= 128:
        return _block(a, lo, n)
    return pairwise_sum_in(a, lo, n, np.empty((4, 64), np.int64), np.empty(64))


@njit
def pairwise_sum_in(a, lo, n, stack, left):
    """``pairwise_sum`` with the caller's scratch: ``stack`` int64[4, 64] (rows: start, length, stage), ``left``
    float64[64]. Written with an explicit stack (a recursive kernel does not load from Numba's cache)."""
    return _pairwise_tree(a, lo, n, stack, left, False)


@njit
def _pairwise_tree(a, lo, n, stack, left, leaf_sums):
    """NumPy's pairwise order over n terms: its leaves (runs of at most 128 terms, ``_block``) combined as it
    combines them. The leaves are ``_block``s of a[lo:lo+n], or, with ``leaf_sums``, already summed: a[lo],
    a[lo+1], ... in the order the recursion reaches them (left to right, as ``leaves`` lists them)."""
    if n <= 128:
        return a[lo] if leaf_sums else _block(a, lo, n)
    los, ns = stack[0], stack[1]
    stage = stack[2]   # 0: split next, 1: the left half is summing, 2: the right half is
    los[0], ns[0], stage[0] = lo, n, 0
    sp = 1
    result = 0.0
    right = 0.0
    taken = lo
    while sp > 0:
        top = sp - 1
        m = ns[top]
        if m <= 128 or stage[top] == 2:
            if m > 128:
                v = left[top] + right
            elif leaf_sums:
                v = a[taken]
                taken += 1
            else:
                v = _block(a, los[top], m)
            sp -= 1
            if sp == 0:
                result = v
            elif stage[sp - 1] == 1:
                left[sp - 1] = v
                stage[sp - 1] = 2
                n2 = ns[sp - 1] // 2
                n2 -= n2 % 8
                los[sp], ns[sp], stage[sp] = los[sp - 1] + n2, ns[sp - 1] - n2, 0
                sp += 1
            else:
                right = v
            continue
        n2 = m // 2
        n2 -= n2 % 8
        stage[top] = 1
        los[sp], ns[sp], stage[sp] = los[top], n2, 0
        sp += 1
    return result


@njit(inline="always")
def leaves(n, out, stack):
    """The lengths of the leaves of NumPy's pairwise sum of n terms (``pairwise_sum``), left to right, into
    ``out``; returns how many (1 when n <= 128)."""
    if n <= 128:
        out[0] = n
        return 1
    ns = stack[1]
    ns[0] = n
    sp, count = 1, 0
    while sp > 0:   # depth first, the left half on top
        sp -= 1
        m = ns[sp]
        if m <= 128:
            out[count] = m
            count += 1
            continue
        n2 = m // 2
        n2 -= n2 % 8
        ns[sp], ns[sp + 1] = m - n2, n2
        sp += 2
    return count


@njit(inline="always")
def _tied(s, k):
    t = 1
    while t < k and abs(s[t] - s[0]) <= FLT_EPSILON * max(abs(s[t]), abs(s[0])):
        t += 1
    return t


@njit
def enforce_minimum_probability(p, epsilon, srt):
    """cb.enforce_minimum_probability in place: the projection onto p_a ≥ ε/K (``srt``: scratch)."""
    k = len(p)
    if epsilon == 0.0:
        return
    if epsilon > 0.999:
        for i in range(k):
            p[i] = 1.0 / k
        return
    m = epsilon / k
    srt[:] = np.sort(p)[::-1]
    running, rho, rho_sum = 0.0, 0, srt[0]
    for idx in range(k):
        v = srt[idx]
        running += v
        if v > ((k - idx - 1) * m + running - 1.0) / (idx + 1.0) + m:
            rho, rho_sum = idx, running
    tau = ((k - rho - 1.0) * m + rho_sum - 1.0) / (rho + 1.0)
    for i in range(k):
        p[i] = max(p[i] - tau, m)


@njit
def merand48_first(seed):
    """The first value of VW's LCG from ``seed`` (cb.merand48)."""
    x = np.uint64(0xEECE66D5DEECE66D) * np.uint64(seed) + np.uint64(2147483647)
    return float((x >> np.uint64(25)) & np.uint64(0x7FFFFF)) / float(1 << 23)


@njit
def sample_index(seed, p, k):
    """cb_sim.sample_index: VW's sample_after_normalizing over the ranked p[0:k]."""
    total = 0.0
    for i in range(k):
        if p[i] > 0.0:
            total += p[i]
    if total <= 0.0:
        return 0
    u = merand48_first(seed)
    draw = min(total * u, total)
    running = 0.0
    for i in range(k):
        if p[i] > 0.0:
            running += p[i]
        if running > draw:
            return i
    return k - 1


@njit
def ranked_pmf(scores, k, rule, istate, facc, order, s, p, srt):
    """``cb.CbExploreAdf.pmf`` of the rules above: ``order`` = the actions ranked by (score, action),
    ``p`` their probabilities in that order."""
    for a in range(k):   # insertion sort by (score, action): stable, as Python's sorted
        j = a
        while j > 0 and scores[order[j - 1]] > scores[a]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = a
    for i in range(k):
        s[i] = scores[order[i]]
    epsilon = facc[F_EPSILON]
    if rule == RULE_EPSILON:
        for i in range(k):
            p[i] = epsilon / k
        if istate[I_FIRST_ONLY]:
            p[0] += 1.0 - epsilon
        else:
            t = _tied(s, k)
            for i in range(t):
                p[i] += (1.0 - epsilon) / t
    elif rule == RULE_FIRST:
        for i in range(k):
            p[i] = 1.0 / k if istate[I_TAU] > 0 else (1.0 if i == 0 else 0.0)
        enforce_minimum_probability(p, epsilon, srt)
    else:
        gamma = facc[F_GAMMA_SCALE] * float(istate[I_EVENTS_LEARNED]) ** facc[F_GAMMA_EXPONENT]
        best = 0
        for i in range(1, k):   # np.argmin: the first least
            if s[i] < s[best]:
                best = i
        for i in range(k):
            p[i] = 1.0 / (k + gamma * (s[i] - s[best]))
        p[best] = 0.0
        p[best] = 1.0 - pairwise_sum(p, 0, k)
        enforce_minimum_probability(p, epsilon, srt)


@njit(inline="always")
def _row(pool_index, pool_keys, istate, h):
    """The pool row of hashed index h, handing out the next group when h is new (row_pool.RowPool.rows_for;
    groups of one row: the learner is not multiclass). The caller made room."""
    r = pool_index[h]
    if r == 0:
        g = istate[I_USED]
        pool_index[h] = np.int32(g)
        pool_keys[g] = h
        istate[I_USED] = g + 1
        r = pool_index[h]
    return r


@njit(inline="always")
def _terms(t, k, rows, values, i, mask, width, n_ahead, by_copy, slots, by_slot, pool_index, state, slot_w,
           table_mask, constant, weight_of, gravity, contraction):
    """t[a] = action a's term of feature i: its copy's weight · the feature's value, the stored w read from the
    copy by groups (``by_copy``) or from the pool's rows, with unsigned indices (no negative-index wrapping);
    after asking for what the features ahead will read (hints that change no result): by_copy, the slot of
    feature i + 2·AHEAD and the w of the copies of feature i + AHEAD; else the index entries of feature
    i + 2·AHEAD and the pool rows of the copies of feature i + AHEAD."""
    x = values[i]
    r = _hashed(rows, i, table_mask, constant)
    if by_copy:
        if i + 2 * AHEAD < n_ahead:
            prefetch_at(slots, _hashed(rows, i + 2 * AHEAD, table_mask, constant) >> width)
        if i + AHEAD < n_ahead:
            ahead = np.int64(slots[_hashed(rows, i + AHEAD, table_mask, constant) >> width]) << width
            prefetch_at(by_slot, ahead)
            prefetch_at(by_slot, ahead + mask)
        at = np.int64(slots[r >> width]) << width
        for a in range(k):
            t[a] = weight_of(by_slot[np.uint64(at + a)], gravity, contraction) * x
        return
    if i + 2 * AHEAD < n_ahead:
        ahead = _hashed(rows, i + 2 * AHEAD, table_mask, constant)
        prefetch_at(pool_index, ahead - (ahead & mask))
    if i + AHEAD < n_ahead:
        ahead = _hashed(rows, i + AHEAD, table_mask, constant)
        for a in range(k):
            prefetch(state, pool_index[ahead - (ahead & mask) + a], 0)
    base = r - (r & mask)
    for a in range(k):
        t[a] = weight_of(state[np.uint64(pool_index[np.uint64(base + a)]), slot_w], gravity, contraction) * x


@njit(inline="always")
def _hashed(rows, i, table_mask, constant):
    """The hashed index of feature i: the parser's, but VW's constant index (``constant``) for the parser's
    2^bits (the learner's constant, which cbify hashes as VW does)."""
    r = np.int64(rows[i])
    return constant if r == table_mask + 1 else r


@njit(cache=True, nogil=True)
def refill(by_slot, slots, pool_keys, state, used, width, slot_w, slots_used):
    """``by_slot``'s slots in use (made, or) made again from the pool's stored w (slot ``slot_w`` of ``state``):
    every index the never-touched row's w (row 0), then each pool row's (rows 1..used-1, of hashed index
    ``pool_keys[r]``) where its group has a slot (in the kernel, one whose group has none yet is the example's
    being learned: the kernel gives it one)."""
    span = np.int64(1) << width
    template = state[0, slot_w]
    for i in range(slots_used * span):
        by_slot[i] = template
    for r in range(1, used):
        h = np.int64(pool_keys[r])
        g = np.int64(slots[h >> width])
        if g != 0:
            by_slot[(g << width) + (h & (span - 1))] = state[r, slot_w]


@njit(inline="always")
def cbify_loop(predict, update, weight_scalars, weight_of, may_have_folded, slot_w, table, settings, tally,
               pool_index, pool_keys, slots, by_slot, rows, values, row_ptr, fcount, labels, weights, k, istate, facc,
               out_action, out_prob, out_weight, out_loss):
    # borrowed views (engine/borrowed.py): no reference counting in the loop
    table, settings, tally = lend_table(table), lend_settings(settings), lend_tally(tally)
    pool_index, pool_keys, rows, values = borrowed(pool_index), borrowed(pool_keys), borrowed(rows), borrowed(values)
    slots, by_slot = borrowed(slots), borrowed(by_slot)
    row_ptr, fcount, labels, weights = borrowed(row_ptr), borrowed(fcount), borrowed(labels), borrowed(weights)
    istate, facc = borrowed(istate), borrowed(facc)
    out_action, out_prob = borrowed(out_action), borrowed(out_prob)
    out_weight, out_loss = borrowed(out_weight), borrowed(out_loss)
    counters = table.counters
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    rule = istate[I_RULE]
    learn = istate[I_LEARN] != 0
    table_mask = (np.int64(1) << istate[I_BITS]) - 1
    constant = istate[I_CONSTANT]
    width = 0   # mask = 2^(bits of K) - 1, K.bit_length()
    kk = k
    while kk > 0:
        width += 1
        kk >>= 1
    mask = (np.int64(1) << width) - 1
    n_lines = len(labels)
    most = most_features(row_ptr, n_lines)
    # the loop's scratch, taken as borrowed views (``owners`` holds them to the loop's end): leaf_n, the example's
    # leaves of NumPy's pairwise sum (``leaves``); sums, action a's leaf sums at [a·leaves, (a+1)·leaves); acc,
    # _block's eight running sums (the q-th of action a at q·K + a); res, each action's running sum
    most_leaves = most // 32 + 2
    owners = (np.empty(most_leaves, np.int64), np.empty(k * most_leaves), np.empty(8 * k), np.empty(k),
              np.empty((4, 64), np.int64), np.empty(64), np.empty(most, np.int32), np.empty(k), np.empty(k, np.int64),
              np.empty(k), np.empty(k), np.empty(k), np.empty(k))
    leaf_n, sums, acc, res = borrowed(owners[0]), borrowed(owners[1]), borrowed(owners[2]), borrowed(owners[3])
    stack, left, prow, scores = borrowed(owners[4]), borrowed(owners[5]), borrowed(owners[6]), borrowed(owners[7])
    order, s, p, srt = borrowed(owners[8]), borrowed(owners[9]), borrowed(owners[10]), borrowed(owners[11])
    t = borrowed(owners[12])   # a feature's K terms
    state = table.state
    by_copy = istate[I_BY_COPY] != 0
    # what the scores read is asked for ahead only when it outgrows a core's nearer caches
    read_bytes = istate[I_SLOTS_USED] << (width + 3) if by_copy else istate[I_USED] * state.shape[1] * 8
    n_ahead = len(rows) if read_bytes > PREFETCH_BYTES else 0
    span = mask + 1
    for e in range(n_lines):
        lo, hi = row_ptr[e], row_ptr[e + 1]
        n = hi - lo
        n_leaves = leaves(n, leaf_n, stack)
        gravity, contraction = weight_scalars(table)
        i = lo   # feature-major: the K copies of a row are K neighbouring hashed indices
        for leaf in range(n_leaves):   # each action's terms summed in _block's order, leaf by leaf
            m = leaf_n[leaf]
            if m < 8:
                for a in range(k):
                    res[a] = 0.0
                for _ in range(m):
                    _terms(t, k, rows, values, i, mask, width, n_ahead, by_copy, slots, by_slot, pool_index, state,
                           slot_w, table_mask, constant, weight_of, gravity, contraction)
                    for a in range(k):
                        res[a] += t[a]
                    i += 1
            else:
                end8 = m - m % 8
                for q in range(8):
                    _terms(t, k, rows, values, i, mask, width, n_ahead, by_copy, slots, by_slot, pool_index, state,
                           slot_w, table_mask, constant, weight_of, gravity, contraction)
                    for a in range(k):
                        acc[np.uint64(q * k + a)] = t[a]
                    i += 1
                for r8 in range(8, end8):
                    _terms(t, k, rows, values, i, mask, width, n_ahead, by_copy, slots, by_slot, pool_index, state,
                           slot_w, table_mask, constant, weight_of, gravity, contraction)
                    q = (r8 % 8) * k
                    for a in range(k):
                        acc[np.uint64(q + a)] += t[a]
                    i += 1
                for a in range(k):
                    res[a] = (((acc[a] + acc[k + a]) + (acc[2 * k + a] + acc[3 * k + a]))
                              + ((acc[4 * k + a] + acc[5 * k + a]) + (acc[6 * k + a] + acc[7 * k + a])))
                for _ in range(end8, m):
                    _terms(t, k, rows, values, i, mask, width, n_ahead, by_copy, slots, by_slot, pool_index, state,
                           slot_w, table_mask, constant, weight_of, gravity, contraction)
                    for a in range(k):
                        res[a] += t[a]
                    i += 1
            for a in range(k):
                sums[a * n_leaves + leaf] = res[a]
        for a in range(k):
            scores[a] = sums[a] if n_leaves == 1 else _pairwise_tree(sums, a * n_leaves, n, stack, left, True)
        ranked_pmf(scores, k, rule, istate, facc, order, s, p, srt)
        i = sample_index(istate[I_APP_SEED] + istate[I_COUNTER], p, k)
        istate[I_COUNTER] += 1
        action, prob = order[i], p[i]
        label = labels[e]
        w = weights[e]
        istate[I_CURRENT_FEATURES] = fcount[e]
        if label > 0:
            c = facc[F_LOSS0] if action + 1 == label else facc[F_LOSS1]
            if facc[F_FLIP] != 0.0:
                c = -c
            if learn:
                if rule == RULE_SQUARECB and action != k - 1:
                    prob_used = 1.0
                else:
                    prob_used = prob
                istate[I_EVENT_SUM] += 1
                istate[I_ACTION_SUM] += k
                h = w / prob_used * (istate[I_EVENT_SUM] / istate[I_ACTION_SUM])
                for j in range(n):
                    r = _hashed(rows, lo + j, table_mask, constant)
                    prow[j] = _row(pool_index, pool_keys, istate, (r - (r & mask)) + action)
                y = c
                held_out, learning = start_example(holdout, True, h, y)
                widen_label_range(counters, settings, y)
                pv = 0.0 + predict(table, settings, prow, values[lo:hi], 0, n, 0, learning, h)
                if not np.isfinite(pv):   # Learner.process: diverged, the example neither counts nor teaches
                    stats[S_DIVERGED] = 0.0
                    istate[I_DIVERGED] = e + 1
                    release(owners)
                    return e
                pv = clip_prediction(pv, counters, settings)
                fc = fcount[e]
                if account_binary(tally, counters, settings, held_out, fc, y, h, pv) and learning:
                    derivative = loss_derivative(settings.loss, pv, y, settings.tau)
                    if settings.clip:
                        derivative = min(max(derivative, -1.0), 1.0)
                    g_before, c_before = weight_scalars(table)
                    update(table, settings, prow, values[lo:hi], 0, n, 0, pv, y, h, h * derivative)
                    counters[C_ROUNDS] += 1.0
                    if by_copy and may_have_folded(table, settings, g_before, c_before):   # every w may have moved
                        refill(by_slot, slots, pool_keys, state, istate[I_USED], width, slot_w,
                               istate[I_SLOTS_USED])
                for j in range(n if by_copy else 0):   # the learned copies' w, as predict and update left them
                    g = _hashed(rows, lo + j, table_mask, constant) >> width
                    if slots[g] == 0:   # the group's first row: its w were all the never-touched row's
                        slots[g] = np.int32(istate[I_SLOTS_USED])
                        istate[I_SLOTS_USED] += 1
                        for a in range(span):
                            by_slot[(np.int64(slots[g]) << width) + a] = by_slot[a]
                    by_slot[(np.int64(slots[g]) << width) + action] = state[prow[j], slot_w]
                progress_row(progress, np.int64(0), stats, holdout, y, pv, fc)
                istate[I_EVENTS_LEARNED] += 1
                if rule == RULE_FIRST and istate[I_TAU] > 0:
                    istate[I_TAU] -= 1
            facc[F_LABELLED_WEIGHT] += w
            facc[F_SUM_LOSS] += w if action + 1 != label else 0.0
            facc[F_SUM_COST] += w * c
            facc[F_SUM_COST2] += w * c * c
            istate[I_COSTS_SEEN] += 1
        istate[I_EXAMPLES] += 1
        istate[I_TOTAL_FEATURES] += fcount[e]
        out_action[e] = action + 1
        out_prob[e] = prob
        out_weight[e] = facc[F_LABELLED_WEIGHT]
        out_loss[e] = facc[F_SUM_LOSS]
    release(owners)
    return n_lines


@njit(cache=True, nogil=True)
def cbify_gd(table, settings, tally, pool_index, pool_keys, slots, by_slot, rows, values, row_ptr, fcount, labels,
             weights, k, istate, facc, out_action, out_prob, out_weight, out_loss):
    """``cbify_loop`` over VW's gd learner (engine/gd.py)."""
    return cbify_loop(gd.predict, gd.update, gd.weight_scalars, gd.weight_of, gd.may_have_folded, gd.W, table,
                      settings, tally, pool_index, pool_keys, slots, by_slot, rows, values, row_ptr, fcount, labels,
                      weights, k, istate, facc, out_action, out_prob, out_weight, out_loss)


KERNELS = {"gd": cbify_gd}
