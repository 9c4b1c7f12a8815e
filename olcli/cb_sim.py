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
from olcli.cb_eval import Evaluate, int_in, parse_eval_line
from olcli.cb_format import CbEvent, clip, located, split_line
from olcli.errors import DataError

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
        interactions/n-grams/skips, and base learners other than gd."""
        p, m = self.policy, self.policy.learner.model
        if not self._direct() or p.rule not in ("epsilon", "first", "squarecb") or m.classes:
            return None
        if m.algorithm not in ("gd",) or m.pool.group != 1:
            return None
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
        rows = index[:used].astype(np.int64)
        rows[rows == (1 << bits)] = cb.CONSTANT_HASH & ((1 << bits) - 1)
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
                cl.I_FIRST_ONLY, cl.I_LEARN, cl.I_CURRENT_FEATURES]] = (
            self.counter, self.app_seed, self.examples, self.total_features, self.costs_seen,
            policy.events_learned, policy.tau, policy.event_sum[0], policy.action_sum[0], pool.used, bits, rule,
            int(bool(policy.first_only)), int(bool(learn)), self.current_features)
        facc = np.zeros(cl.N_FACC)
        facc[[cl.F_LABELLED_WEIGHT, cl.F_SUM_LOSS, cl.F_SUM_COST, cl.F_SUM_COST2, cl.F_EPSILON,
              cl.F_GAMMA_SCALE, cl.F_GAMMA_EXPONENT, cl.F_LOSS0, cl.F_LOSS1, cl.F_FLIP]] = (
            self.labelled_weight, self.sum_loss, self.sum_cost, self.sum_cost2, policy.epsilon,
            policy.gamma_scale, policy.gamma_exponent, self.loss0, self.loss1, float(self.flip))
        action, prob = np.zeros(n, dtype=np.int64), np.zeros(n)
        weight_after, loss_after = np.zeros(n), np.zeros(n)
        done = int(kernel(learner.table(), learner.settings(True), learner.tally, pool.index, pool.keys, rows,
                          values, row_ptr, fcount, labels, weights, np.int64(self.k), istate, facc, action, prob,
                          weight_after, loss_after))
        (self.counter, self.examples, self.total_features, self.costs_seen, policy.events_learned, policy.tau,
         policy.event_sum[0], policy.action_sum[0], pool.used, self.current_features) = (
            int(istate[i]) for i in (cl.I_COUNTER, cl.I_EXAMPLES, cl.I_TOTAL_FEATURES, cl.I_COSTS_SEEN,
                                     cl.I_EVENTS_LEARNED, cl.I_TAU, cl.I_EVENT_SUM, cl.I_ACTION_SUM, cl.I_USED,
                                     cl.I_CURRENT_FEATURES))
        (self.labelled_weight, self.sum_loss, self.sum_cost, self.sum_cost2) = (
            float(facc[i]) for i in (cl.F_LABELLED_WEIGHT, cl.F_SUM_LOSS, cl.F_SUM_COST, cl.F_SUM_COST2))
        return done, action, prob, weight_after, loss_after, fcount, bool(istate[cl.I_DIVERGED])

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


def _stepped(name, n, on_error, step, *args, **kwargs):
    """(True, ``step(*args, **kwargs)``), or (False, None) when the learner's parser refused a feature
    value of line ``n`` (nothing learned): the error, named with file and line, is raised when
    ``on_error`` is None, else handed to it."""
    try:
        return True, step(*args, **kwargs)
    except DataError as exc:
        error = DataError(f"{located(name, n)}: {learner_error(exc)}")
        if on_error is None:
            raise error from None
        on_error(error)
        return False, None


def run_lines(policy, settings, data, table, out, testing, on_error):
    """``olcli vw --cbify K`` / ``--cb K --eval``: every line of the inputs through ``policy`` (a ``Cbify`` or
    an ``Evaluate``), VW's progress rows on ``table``, ``-p`` lines on ``out`` (the sampled action, or π)."""
    k = settings["actions"]
    for name, stream, live in _sources(data):
        kernel = None if isinstance(policy, Evaluate) else policy.chunk_kernel(learn=not testing)
        if kernel is not None and live is None:
            _run_blocks(policy, kernel, name, stream, k, table, out, testing, on_error)
            continue
        text = _text_of(stream)
        if isinstance(policy, Evaluate):
            for n, raw in enumerate(text, 1):
                if not raw.strip():
                    continue
                try:
                    pi, event = parse_eval_line(raw, k, name, n)
                except DataError as exc:
                    if on_error is None:
                        raise
                    on_error(exc)
                    continue
                if not _stepped(name, n, on_error, policy.step, pi, event, learn=not testing)[0]:
                    continue
                if out is not None:
                    out.write(f"{pi} {event.tag}\n" if event.tag else f"{pi}\n")   # VW: the tag after
                label = f"{event.chosen + 1}:{event.cost:.2g}:{event.probability:.2g}"
                table.row(policy, event, str(pi), label=label)
            continue
        if kernel is not None:
            _run_chunked(policy, kernel, name, text, live, k, table, out, testing, on_error)
            continue
        for n, label, weight, tag, features in read_multiclass(text, k, name, on_error):
            stepped, result = _stepped(name, n, on_error, policy.step, label, weight, features, learn=not testing)
            if not stepped:
                continue
            _written(table, out, policy, result[0], label, weight, tag)


def _written(table, out, policy, action, label, weight, tag):
    """One cbify line's ``-p`` line (the drawn action, then the tag) and progress-table row."""
    if out is not None:
        out.write(f"{action} {tag}\n" if tag else f"{action}\n")
    table.row(policy, CbEvent(None, (), weight=weight), str(action), label="unknown" if label is None else str(label))


CHUNK_LINES = 1024
BLOCK_BYTES = 1 << 18   # a regular file's bytes read at a time (whole lines of it parsed in one call)


def _sources(data):
    """(display name, binary stream, descriptor or None) of every input in turn (as ``cb_format.texts``), with the
    descriptor of an input that can keep a reader waiting (a pipe, FIFO, socket or terminal: None for a
    regular file or compressed data)."""
    import io
    import os
    import stat

    from olcli.inputs import display_name, open_source

    for path in data or ["-"]:
        stream, counted = open_source(path)
        live = None
        try:
            if isinstance(stream, io.BufferedReader):   # not decompressed
                fd = counted.raw.fileno()
                live = None if stat.S_ISREG(os.fstat(fd).st_mode) else fd
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            live = None
        try:
            yield display_name(path), stream, live
        finally:
            if path != "-":
                stream.close()


def _text_of(stream):
    """The lines of a binary input as text (UTF-8, bad bytes replaced, any newline convention), each read in
    olcli's immediate signal phase (``cb_format.interruptible``)."""
    import io

    from olcli.cb_format import interruptible

    return interruptible(io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None))


class _Pending:
    """Multiclass lines run through ``Cbify.run_chunk`` CHUNK_LINES at a time (``add``), printing what the
    per-line loop prints in the same order: ``flush`` runs and writes the lines held; a chunk with a feature
    value the learner refuses goes through ``Cbify.step`` line by line (each refused line named and skipped
    there)."""

    def __init__(self, policy, kernel, name, table, out, testing, on_error):
        self.policy, self.kernel, self.name = policy, kernel, name
        self.table, self.out, self.testing, self.on_error = table, out, testing, on_error
        self.lines = []

    def add(self, line):
        self.lines.append(line)
        if len(self.lines) >= CHUNK_LINES:
            self.flush()

    def refused(self, exc):   # a line read_multiclass refused: the lines before it first
        self.flush()
        self.on_error(exc)

    def flush(self):
        if not self.lines:
            return
        policy, table, out, testing = self.policy, self.table, self.out, self.testing
        items, self.lines = self.lines, []
        try:
            done, action, prob, weight_after, loss_after, fcount, diverged = policy.run_chunk(
                self.kernel, [(label, weight, features) for _, label, weight, _, features in items], not testing)
        except DataError:
            for n, label, weight, tag, features in items:
                stepped, result = _stepped(self.name, n, self.on_error, policy.step, label, weight, features,
                                           learn=not testing)
                if stepped:
                    _written(table, out, policy, result[0], label, weight, tag)
            return
        _written_run(table, out, policy, action[:done], [label for _, label, _, _, _ in items[:done]],
                     [weight for _, _, weight, _, _ in items[:done]], [tag for _, _, _, tag, _ in items[:done]],
                     weight_after[:done], loss_after[:done], fcount[:done], diverged)


def _written_run(table, out, policy, actions, labels, weights, tags, weight_after, loss_after, fcount, diverged):
    """What ``_written`` writes for each line of a kernel call (the table reads the sums as they were after each
    line), then the divergence, if the call stopped at one."""
    if len(actions):
        actions = actions.tolist()
        if out is not None:
            out.write("".join(f"{a} {t}\n" if t else f"{a}\n" for a, t in zip(actions, tags)))
        table.rows(policy, weights, weight_after, loss_after, fcount, actions, labels)
    if diverged:
        from olcli.errors import Diverged

        raise Diverged("the model diverged: a prediction is not a finite number; "
                       + policy.policy.learner.divergence_advice())


def _run_chunked(policy, kernel, name, text, live, k, table, out, testing, on_error):
    """``--cbify``'s lines of one input through ``_Pending``: the lines read before a refused line (its warning),
    a parse error, a signal or the end are run and written first, and so are they before a read from a live
    input (``live``: its descriptor, or None) that has nothing waiting, so a stream's events are learned and
    shown as they come."""
    import select

    pending = _Pending(policy, kernel, name, table, out, testing, on_error)

    def waiting(lines):   # a live input's lines, the pending ones run before a read that would wait
        for line in lines:
            yield line
            if pending.lines and not select.select([live], [], [], 0)[0]:
                pending.flush()

    try:
        for line in read_multiclass(text if live is None else waiting(text), k, name,
                                    None if on_error is None else pending.refused):
            pending.add(line)
    except BaseException:
        pending.flush()
        raise
    pending.flush()


def _run_blocks(policy, kernel, name, stream, k, table, out, testing, on_error):
    """``--cbify``'s lines of a regular (or decompressed) input, BLOCK_BYTES of whole lines at a time: a block
    whose every line ``_simple_block`` reads goes to the kernel as the parser's one call left it
    (``_run_block``); any other block (a label, weight, tag, blank or newline the per-line reading has to
    judge, a feature value the parser refuses) goes line by line through ``_Pending``, as ``_run_chunked``
    does, so what is printed, learned and refused is the same either way."""
    import io

    from olcli import signals

    pending = _Pending(policy, kernel, name, table, out, testing, on_error)
    first = 1   # the block's first line number
    rest = b""
    try:
        while True:
            with signals.immediate():
                piece = stream.read(BLOCK_BYTES)
            data = rest + piece if rest else piece
            if piece:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                block, rest = data[:cut], data[cut:]
            else:
                block, rest = data, b""
            if not block:
                break
            if _run_block(policy, kernel, block, k, table, out, testing):
                first += block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
                continue
            lines = list(io.StringIO(block.decode("utf-8", errors="replace"), newline=None))
            for line in read_multiclass(lines, k, name, None if on_error is None else pending.refused, first):
                pending.add(line)
            pending.flush()
            first += len(lines)
    except BaseException:
        pending.flush()
        raise
    pending.flush()


_HEADS = re.compile(rb"\n([^|\n]*)\|")   # the bytes before a line's first '|' (prefix the block with a newline)


def _simple_block(block, k):
    """(labels 1..K or None, weights, tags, 1-based numbers of the example lines) of a block of whole lines, as
    ``read_multiclass`` would read them, when every line is simple enough to be sure of that from the bytes:
    UTF-8 without '\\r', each line blank (spaces only) or with a '|' and a label part the
    per-line reading accepts (no tab; a class 1..K and a finite weight >= 0, or none). None otherwise."""
    if b"\r" in block:
        return None
    if not block.isascii():
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    heads = _HEADS.findall(b"\n" + block)
    lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    if len(heads) == lines:   # every line an example (the usual block): its label parts read once each
        read = {}
        for head in set(heads):
            read[head] = _label_part(head, k)
            if read[head] is None:
                return None
        got = list(map(read.__getitem__, heads))
        return [g[0] for g in got], [g[1] for g in got], [g[2] for g in got], list(range(1, lines + 1))
    labels, weights, tags, at = [], [], [], []
    read = {}   # label part -> (label, weight, tag): a file's label parts repeat (the classes)
    for no, text in enumerate(block.split(b"\n"), 1):
        bar = text.find(b"|")
        if bar < 0:
            if text.strip(b" "):
                return None
            continue
        at.append(no)
        head = text[:bar]
        got = read.get(head)
        if got is None:
            got = read[head] = _label_part(head, k)
            if got is None:
                return None
        label, weight, tag = got
        labels.append(label)
        weights.append(weight)
        tags.append(tag)
    return labels, weights, tags, at


def _label_part(head, k):
    """(label or None, weight, tag) of the bytes before a line's '|' as ``parse_multiclass_line`` reads them,
    or None where it would refuse them or the bytes hold a tab."""
    if not head.strip(b" "):
        return None, 1.0, None
    if b"\t" in head:
        return None
    words, tag, _ = split_line(head.decode("utf-8"))
    weight = 1.0
    if not words:
        return None, weight, tag
    if len(words) > 2:
        return None
    try:
        label = int(words[0])
        if len(words) == 2:
            weight = float(words[1])
    except ValueError:
        return None
    if not (1 <= label <= k and math.isfinite(weight) and weight >= 0):
        return None
    return label, weight, tag


def _run_block(policy, kernel, block, k, table, out, testing):
    """A block of whole lines through the kernel in one parse and one kernel call, what ``_Pending`` prints
    printed; False (nothing done) when ``_simple_block`` cannot read it, the learner's parser refuses a line
    or finds other example lines than it."""
    from olcli.engine.parse import LABELS_ANY
    from olcli.inputs import Chunk
    from olcli.parsing import parse_chunk

    simple = _simple_block(block, k)
    if simple is None:
        return False
    labels, weights, tags, at = simple
    learner = policy.policy.learner
    try:
        if learner.decide_format("vw", "<examples>") != "vw":
            return False
    except DataError:
        return False
    m = learner.model
    parsed = parse_chunk(Chunk("<examples>", 1, np.frombuffer(block, dtype=np.uint8)), "vw", m.bits, m.constant,
                         LABELS_ANY, learner.feature_spec)
    n = parsed.n_examples
    if parsed.bad_lines or n != len(at) or parsed.example_line[:n].tolist() != at:
        return False
    if not n:
        return True
    done, action, prob, weight_after, loss_after, fcount, diverged = policy.run_parsed(
        kernel, np.array([0 if label is None else label for label in labels], dtype=np.int64), np.array(weights, dtype=np.float64), parsed.index, parsed.value,
        parsed.row_ptr, parsed.feature_count, not testing)
    _written_run(table, out, policy, action[:done], labels[:done], weights[:done], tags[:done], weight_after[:done],
                 loss_after[:done], fcount[:done], diverged)
    return True
