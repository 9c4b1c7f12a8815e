"""Bandit simulation and off-policy evaluation: VW's ``--cbify K`` and ``--cb K --eval``.

``--cbify K`` (VW 9.x ``cbify.cc``, ``predict_adf``/``learn_adf``) turns multiclass data (labels 1..K)
into a contextual-bandit simulation. Per example n (counted from 0 in each run):

1. the K action examples are copies of the line's features at action-specific hashed indices
   (``cb.CbExploreAdf._place``, as ``--cb K``), and the exploration policy (``--cb_explore_adf`` with
   ``--epsilon`` (default 0.05), ``--first``, ``--bag``, ``--softmax`` or ``--squarecb``; VW inserts
   ``--cb_explore_adf`` when the line does not name it) gives its PMF, in ranked order;
2. one action is sampled from the PMF with VW's seeding rule (``sample_after_normalizing``): seed =
   uniform_hash("vw", 0) + n, u = the first ``merand48`` value of that seed, and the chosen position is
   the first whose running sum of probabilities exceeds u·Σp;
3. its cost is ``--loss0`` (default 0) if it is the example's label, else ``--loss1`` (default 1), negated
   with ``--flip_loss_sign``; the event (that action, that cost, its probability) is learned;
4. VW's progress loss of the example is its weight if the sampled action is not the label, else 0
   (``update_stats_multiclass_label``: the progressive 0/1 loss of the played actions, whatever loss0/1).

``-p`` writes the sampled action (1-based). The oracle is ``tests/naive_cb.py``'s ``cbify``.

``--cb K --eval`` (VW's legacy ``cb_algs.cc``, ``learn_eval``; label ``π a:c:p``: the evaluated policy's
action π(x), then the logged event) estimates the evaluated policy's average cost from the logged data,
learning nothing into a policy. With ``--cb_type dr`` (VW's default here) a cost model ĝ — one linear
regressor, action i's copy of the features at index offset K + i − 1 (VW's ``get_cost_pred`` with base K)
— predicts every action's cost in action order; the logged action's prediction is made while learning it
(target c, weight w/p). The example's loss is the DR estimate ĝ_π + [π = a*]·(c − ĝ_π)/p; with ``--cb_type
ips`` it is [π = a*]·c/p and nothing is learned. ``dm`` is refused, as VW refuses it (biased).
``-p`` writes π(x). VW's ``average loss`` is then the estimated average cost of π.
"""

import math
import re

import numpy as np

from olcli import cb
from olcli.cb_eval import int_in
from olcli.cb_format import CbEvent, clip, located, split_line
from olcli.engine.records import C_ROUNDS
from olcli.errors import DataError
from olcli.state import unique_sorted, zeroed_index

# cbify's app_seed: VW's uniform_hash("vw", 2, 0), murmur3_32 of b"vw" with seed 0
# (= olcli.engine.murmur.murmur3_32(b"vw", 0, 2, 0); tests/test_cb_sim.py checks it)
VW_APP_SEED = 53980556


def learner_error(exc) -> str:
    """The learner's parser's message about one copied line (``<examples> line 1: ... (1 bad line(s); ...)``)
    without what names the copy instead of the input: its line in the batch, and the Python API's advice."""
    text = re.sub(r"^<examples> line \d+: ", "", str(exc))
    return re.sub(r" \(\d+ bad line\(s\);[^)]*\)$", "", text)


def parse_multiclass_line(text, k, source="<input>", line=1):
    """A multiclass example line ``label [weight] ['tag] |features`` -> (label or None, weight, tag, features)."""
    words, tag, features = split_line(text)
    if not words:
        return None, 1.0, tag, features
    if len(words) > 2:
        raise DataError(f"{located(source, line)}: a multiclass label is 'label [weight]': {clip(text)!r}")
    label = int_in(words[0], k, "class", text, source, line)
    weight = 1.0
    if len(words) == 2:
        try:
            weight = float(words[1])
        except ValueError:
            raise DataError(f"{located(source, line)}: weight {words[1]!r} is not a number: {clip(text)!r}") from None
        if not math.isfinite(weight) or weight < 0:
            raise DataError(f"{located(source, line)}: weight {words[1]!r} must be finite and >= 0: {clip(text)!r}")
    return label, weight, tag, features


def read_multiclass(lines, k, source="<input>", on_error=None, first=1):
    """(line number, counted from ``first``, label, weight, tag, features) of every non-blank line."""
    for n, text in enumerate(lines, first):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        try:
            yield (n, *parse_multiclass_line(text, k, source, n))
        except DataError as exc:
            if on_error is None:
                raise
            on_error(exc)


def sample_index(seed, probs):
    """VW's sample_after_normalizing: the first position whose running sum of probs (negatives as 0)
    exceeds u·Σp, u the first merand48 value of ``seed``; the last position if rounding leaves none."""
    probs = [p if p > 0.0 else 0.0 for p in probs]
    total = sum(probs)
    if total <= 0.0:
        return 0
    u, _ = cb.merand48(seed)
    draw = min(total * u, total)
    running = 0.0
    for i, p in enumerate(probs):
        running += p
        if running > draw:
            return i
    return len(probs) - 1


class _ByGroup:
    """The chunk kernel's copy of the stored w by groups (``Cbify._weights_by_group``), and what it was made from:
    ``pool``, its count of updates ``rounds`` (C_ROUNDS) and ``bits``."""
    __slots__ = ("slots", "by_slot", "used", "pool", "rounds", "bits")

    def __init__(self, slots, by_slot, used, pool, rounds, bits):
        self.slots, self.by_slot, self.used, self.pool, self.rounds, self.bits = slots, by_slot, used, pool, rounds, bits


class Cbify:
    """VW's ``--cbify K`` over a placed ``cb.CbExploreAdf`` policy (see the module's docstring).

    ``step(label, weight, features)`` returns (sampled action 1..K, the PMF as (action 0-based,
    probability) in ranked order, the sampled action's probability). The counters are VW's summary's.
    """

    def __init__(self, policy, k, loss0=0.0, loss1=1.0, flip_loss_sign=False, app_seed=VW_APP_SEED):
        self.policy, self.k = policy, int(k)
        self.loss0, self.loss1, self.flip = float(loss0), float(loss1), bool(flip_loss_sign)
        self.app_seed = app_seed
        self.counter = 0           # VW's example_counter: the seed of example n is app_seed + n
        self.examples = 0
        self.labelled_weight = 0.0
        self.sum_loss = 0.0
        self.total_features = 0
        self.current_features = 0
        self.sum_cost = 0.0        # Σ weight · cost of the played actions (the report's value)
        self.sum_cost2 = 0.0
        self.costs_seen = 0
        self._by_group = None      # the chunk kernel's copy of the w (``_weights_by_group``)

    def state(self) -> dict:
        """The policy's state (a model file keeps it); VW's example counter starts at 0 in every run."""
        return self.policy.state()

    def restore(self, state: dict) -> None:
        self.policy.restore(state)

    def cost(self, label, action):
        c = self.loss0 if action == label else self.loss1
        return -c if self.flip else c

    def _direct(self):
        """Can this event loop skip the K text copies (``_scores``/``_learn_mtr``)? One weight copy per action
        (mtr, no bag) and no features the kernel makes (interactions, n-grams, skips)."""
        p, m = self.policy, self.policy.learner.model
        return p.rule != "bag" and p.cb_type == "mtr" and not (m.interactions or m.ngram or m.skips)

    def _parse(self, features):
        """The line parsed once: its table rows (the learner's constant row at VW's constant index), values,
        VW's feature count, and the index dtype the kernels take."""
        learner = self.policy.learner
        batch, _ = learner.to_batch([features or "|"])
        bits = learner.model.bits
        used = int(batch.row_ptr[1])
        rows = batch.index[:used].astype(np.int64)
        rows = np.where(rows == (1 << bits), cb.CONSTANT_HASH & ((1 << bits) - 1), rows)
        return rows, batch.value[:used].copy(), int(batch.feature_count[0]), batch.index.dtype

    def _placed(self, rows, actions):
        """The rows of each action's copy (``cb.CbExploreAdf._place`` with one copy per action)."""
        table = (1 << self.policy.learner.model.bits) - 1
        mask = (1 << self.k.bit_length()) - 1
        return ((rows - (rows & mask))[None, :] + np.asarray(actions, dtype=np.int64)[:, None]) & table

    def _scores(self, parsed):
        """The K actions' raw linear scores from the weights of their placed rows (one kernel call)."""
        rows, values, _, _ = parsed
        placed = self._placed(rows, range(self.k))
        w = self.policy.learner.weights_at(placed.ravel()).reshape(self.k, len(rows))
        return np.array([(w[a] * values).sum() for a in range(self.k)])

    def _learn_mtr(self, parsed, action, cost, prob, weight):
        """``cb.CbExploreAdf.learn`` of one mtr event (no bag): the chosen action's copy regressed on its cost
        with weight w/p · events/actions (squarecb: p = 1 unless the chosen action is the last), then the
        policy's counters (squarecb's events, first's τ)."""
        from olcli.engine.records import Batch

        p = self.policy
        if p.rule == "squarecb" and action != self.k - 1:
            prob = 1.0
        p.event_sum[0] += 1
        p.action_sum[0] += self.k
        rows, values, count, dtype = parsed
        batch = Batch(np.array([float(cost)]), np.array([weight / prob * (p.event_sum[0] / p.action_sum[0])]),
                      np.zeros(1), np.array([0, len(rows)], dtype=np.int64),
                      self._placed(rows, [action])[0].astype(dtype), values, np.array([count], dtype=np.int64))
        done = p.learner.process(batch, True)
        if done.diverged_at >= 0:
            from olcli.errors import Diverged

            raise Diverged("the model diverged: a prediction is not a finite number; "
                           + p.learner.divergence_advice())
        p.events_learned += 1
        if p.rule == "first" and p.tau > 0:
            p.tau -= 1

    def chunk_kernel(self, learn=True):
        """The kernel that runs this simulation a chunk of lines at a time (``engine/cb_loop.py``), or None
        where the per-line ``step`` is the path: rules softmax and bag, cb_types other than mtr,
        interactions/n-grams/skips, base learners other than gd, a pool laid out in member regions, and a
        table of fewer bits than K's (2^bits <= K: the actions' copies of a row would wrap round it)."""
        p, m = self.policy, self.policy.learner.model
        if not self._direct() or p.rule not in ("epsilon", "first", "squarecb") or m.classes:
            return None
        if m.algorithm not in ("gd",) or m.pool.group != 1 or m.pool.split != 1 or m.bits < self.k.bit_length():
            return None   # (with fewer bits than K's, the actions' copies of a row wrap round the table)
        from olcli.engine import cb_loop

        return cb_loop.KERNELS[m.algorithm]

    def run_chunk(self, kernel, items, learn=True):
        """``step`` of every (label, weight, features) of ``items`` in one kernel call (``run_parsed`` of the
        features parsed by the learner). A line the learner's parser refuses raises DataError before anything
        is learned (the caller then steps the lines one by one)."""
        batch, _ = self.policy.learner.to_batch([features or "|" for _, _, features in items])
        labels = np.array([0 if label is None else label for label, _, _ in items], dtype=np.int64)
        weights = np.array([weight for _, weight, _ in items], dtype=np.float64)
        return self.run_parsed(kernel, labels, weights, batch.index, batch.value, batch.row_ptr, batch.feature_count,
                               learn)

    def run_parsed(self, kernel, labels, weights, index, value, row_ptr, feature_count, learn=True):
        """``step`` of every line of a chunk in one kernel call: ``labels`` (1..K, 0 = none) and ``weights`` per
        line, its features as the learner's parser gives them (hashed indices with the constant at 2^bits,
        values, row pointers, VW's feature counts). Returns (the lines done, the drawn actions 1..K, their
        probabilities, the labelled weight and loss sums after each line, VW's feature count of each, whether
        a prediction diverged); a diverged prediction stops the call after the lines before it (``done`` of
        them), which are counted."""
        from olcli.engine import cb_loop as cl

        policy = self.policy
        learner = policy.learner
        model = learner.model
        bits = model.bits
        n = len(labels)
        used = int(row_ptr[n])
        rows = np.ascontiguousarray(index[:used], dtype=np.int32)
        values = np.ascontiguousarray(value[:used], dtype=np.float64)
        row_ptr = np.ascontiguousarray(row_ptr[:n + 1], dtype=np.int64)
        fcount = np.ascontiguousarray(feature_count[:n], dtype=np.int64)
        pool = model.pool
        if learn:
            pool.grow(pool.used + used)   # room for every feature of the chunk being new
        rule = {"epsilon": cl.RULE_EPSILON, "first": cl.RULE_FIRST, "squarecb": cl.RULE_SQUARECB}[policy.rule]
        istate = np.zeros(cl.N_ISTATE, dtype=np.int64)
        istate[[cl.I_COUNTER, cl.I_APP_SEED, cl.I_EXAMPLES, cl.I_TOTAL_FEATURES, cl.I_COSTS_SEEN,
                cl.I_EVENTS_LEARNED, cl.I_TAU, cl.I_EVENT_SUM, cl.I_ACTION_SUM, cl.I_USED, cl.I_BITS, cl.I_RULE,
                cl.I_FIRST_ONLY, cl.I_LEARN, cl.I_CURRENT_FEATURES, cl.I_CONSTANT]] = (
            self.counter, self.app_seed, self.examples, self.total_features, self.costs_seen,
            policy.events_learned, policy.tau, policy.event_sum[0], policy.action_sum[0], pool.used, bits, rule,
            int(bool(policy.first_only)), int(bool(learn)), self.current_features, cb.CONSTANT_HASH & ((1 << bits) - 1))
        facc = np.zeros(cl.N_FACC)
        facc[[cl.F_LABELLED_WEIGHT, cl.F_SUM_LOSS, cl.F_SUM_COST, cl.F_SUM_COST2, cl.F_EPSILON,
              cl.F_GAMMA_SCALE, cl.F_GAMMA_EXPONENT, cl.F_LOSS0, cl.F_LOSS1, cl.F_FLIP]] = (
            self.labelled_weight, self.sum_loss, self.sum_cost, self.sum_cost2, policy.epsilon,
            policy.gamma_scale, policy.gamma_exponent, self.loss0, self.loss1, float(self.flip))
        action, prob = np.zeros(n, dtype=np.int64), np.zeros(n)
        weight_after, loss_after = np.zeros(n), np.zeros(n)
        table = learner.table()
        by_copy = self.k < cl.COPY_ACTIONS and bits <= cl.COPY_BITS
        if by_copy:
            by_group = self._weights_by_group(pool, bits, table, used if learn else 0)
        else:   # the scores read the pool's rows
            by_group = _ByGroup(np.zeros(1, np.int32), np.zeros(0), 0, pool, 0.0, bits)
        istate[cl.I_SLOTS_USED], istate[cl.I_BY_COPY] = by_group.used, by_copy
        done = int(kernel(table, learner.settings(True), learner.tally, pool.index, pool.keys, by_group.slots,
                          by_group.by_slot, rows, values, row_ptr, fcount, labels, weights, np.int64(self.k), istate,
                          facc, action, prob, weight_after, loss_after))
        if by_copy and not istate[cl.I_DIVERGED]:   # else made again if ever asked for
            by_group.used, by_group.rounds = int(istate[cl.I_SLOTS_USED]), float(table.counters[C_ROUNDS])
            self._by_group = by_group
        (self.counter, self.examples, self.total_features, self.costs_seen, policy.events_learned, policy.tau,
         policy.event_sum[0], policy.action_sum[0], pool.used, self.current_features) = (
            int(istate[i]) for i in (cl.I_COUNTER, cl.I_EXAMPLES, cl.I_TOTAL_FEATURES, cl.I_COSTS_SEEN,
                                     cl.I_EVENTS_LEARNED, cl.I_TAU, cl.I_EVENT_SUM, cl.I_ACTION_SUM, cl.I_USED,
                                     cl.I_CURRENT_FEATURES))
        (self.labelled_weight, self.sum_loss, self.sum_cost, self.sum_cost2) = (
            float(facc[i]) for i in (cl.F_LABELLED_WEIGHT, cl.F_SUM_LOSS, cl.F_SUM_COST, cl.F_SUM_COST2))
        return done, action, prob, weight_after, loss_after, fcount, bool(istate[cl.I_DIVERGED])

    def _weights_by_group(self, pool, bits, table, room):
        """The chunk kernel's copy of the stored w (gd's slot W) by groups of 2^width hashed indices
        (engine/cb_loop.py): a ``_ByGroup`` of ``slots`` int32[2^(bits − width) + 1] and ``by_slot``
        float64[slots × 2^width] with room for ``room`` more slots. Kept from the last kernel call while the
        model learned nothing since (its count of updates, C_ROUNDS, is the one that call left; the per-line
        ``step`` and every other learning path count theirs; within a call the kernel makes it again after an
        update that may have folded --l1/--l2 into every stored w), else made again: slot 0 for the groups
        without a pool row, then a slot for each group with one, in increasing group order, filled from the
        pool by the kernel's own ``cb_loop.refill``. Memory: 4 bytes per group of the table and 8 × 2^width
        bytes per slot, pages written only."""
        from olcli.engine import cb_loop
        from olcli.engine.gd import W

        width = self.k.bit_length()
        span = 1 << width
        kept = self._by_group
        rounds = float(table.counters[C_ROUNDS])
        if kept is None or kept.pool is not pool or kept.rounds != rounds or kept.bits != bits:
            groups = unique_sorted(pool.keys[1:pool.used] >> width)
            slots = zeroed_index((1 << (bits - width)) + 1)
            slots[groups] = np.arange(1, len(groups) + 1, dtype=np.int32)
            kept = _ByGroup(slots, zeroed_index((len(groups) + 1 + room) * span, np.float64), len(groups) + 1, pool,
                            rounds, bits)
            cb_loop.refill(kept.by_slot, slots, pool.keys, pool.state, pool.used, width, W, kept.used)
        room = min(room, len(kept.slots) + 1 - kept.used)   # no more slots than groups
        if (kept.used + room) * span > len(kept.by_slot):   # (a new slot's w are copied from slot 0's)
            grown = zeroed_index(max(len(kept.by_slot) // span * 5 // 4, kept.used + room) * span, np.float64)
            grown[:kept.used * span] = kept.by_slot[:kept.used * span]
            kept.by_slot = grown
        self._by_group = None
        return kept

    def step(self, label, weight, features, learn=True):
        policy = self.policy
        event = CbEvent(None, (features,) * self.k)
        direct = self._direct()
        if direct:
            parsed = self._parse(features)
            scores, counted = self._scores(parsed), parsed[2] * self.k
        else:
            scores, counted = policy.scores(event)
        pmf = policy.bag_pmf(event) if policy.rule == "bag" else policy.pmf(scores)
        i = sample_index(self.app_seed + self.counter, [p for _, p in pmf])
        self.counter += 1
        action, prob = pmf[i]
        self.current_features = counted // self.k   # the line's own features (with its constant)
        if label is not None:
            c = self.cost(label, action + 1)
            if learn and direct:
                self._learn_mtr(parsed, action, c, prob, weight)
            elif learn:
                policy.learn(CbEvent(None, event.actions, action, c, prob, weight))
            self.labelled_weight += weight
            self.sum_loss += weight if action + 1 != label else 0.0
            self.sum_cost += weight * c
            self.sum_cost2 += weight * c * c
            self.costs_seen += 1
        self.examples += 1
        self.total_features += self.current_features
        return action + 1, pmf, prob
