"""``olcli serve`` of a contextual-bandit model (one written by ``olcli vw --cb_explore_adf -f``, ``olcli
train --cb-explore-adf -f`` or ``Learner(cb=...).save``): rank the actions of a request, then learn from
the reward of the action played.

**Rank** (``POST /rank``, or a line ``{"shared": ..., "actions": [...]}`` on the line protocol): the
request's event (the shared features and one features text per action, as ``CbLearner.predict`` takes
them) is ranked by the served model, the exploration rule gives the PMF, and one action is sampled from
it as VW samples (``cb_learner.sample``: the ranking in VW's order, u · Σp against the running sum) with
u = ``merand48(seed + n)``, n the number of events ranked before this one by this process and seed
``--cb-seed`` (drawn at start when not given; logged and shown in ``GET /model``): the same seed and the
same requests in the same order give the same actions. The reply: ``event_id`` (the request's
``event_id``, or ``<run>-<n>`` made here), ``action`` (its position), ``probability`` (the PMF's
probability of it, the one learned with) and ``pmf`` (one probability per action, in the request's
order). ``cb_adf`` models (no exploration) play the best action with probability 1.

**Reward** (``POST /reward``, or a line ``{"event_id": ..., "cost": c}``; ``"reward": r`` is cost −r), with
``--learn``: the event waiting under that id is learned with the played action, its cost and the logged
probability (``CbLearner.learn_event``, the model changes as ``olcli train`` on the ADF block would),
then forgotten. The rank parses and scores the event's action lines in one kernel call
(engine/cb_single.py) and keeps the played action's line as parsed; the reward learns that line
(``CbLearner.learn_parsed``: the same model as ``learn_event`` on the text, tests/test_serve_cb.py) when
the reduction learns it alone (cb_type mtr, no bag) and the model was not reloaded in between, in one call
of the same compiled entry (``EventScorer.learn``; ``OneLineLearning`` when a feature of the line has no
weight row yet); otherwise ``learn_event`` parses the event again. Events wait in a table of at most ``--cb-pending`` entries (the oldest is dropped when it
is full); an id that is not waiting (never issued, already rewarded, or dropped) gets an error that says
so (HTTP 404). Everything runs on the server's event loop thread (one writer); the model's ``cb`` field is
refreshed before each save, so a saved file is the model ``olcli train`` learns from the rewarded events
in the order their rewards came (tests/test_serve_cb.py). Events still waiting when the server stops are
not learned.
"""

import json
import os
from collections import OrderedDict

import numpy as np

from olcli import cb
from olcli.cb_format import CbEvent
from olcli.cb_learner import CbLearner, make_event, sample
from olcli.engine.cb_single import EventScorer
from olcli.engine.records import S_DIVERGED
from olcli.errors import DataError, Diverged
from olcli.kernel_calls import Processed

MAX_EVENT_ID = 256
_scan = json.JSONDecoder().scan_once   # json.loads' own scanner (the C one where there is one)


def _document(line: bytes):
    """``json.loads(line)``. A line starting with '{' and then not NUL is UTF-8 for json.loads (its
    ``detect_encoding``): decoded as it decodes it and scanned by its scanner directly, without the
    decoder's two whitespace matches around the document; anything else, and any line that does not scan
    as one document then only whitespace, goes to ``json.loads``, which says what is wrong with it."""
    if line[:1] == b"{" and line[1:2] != b"\0":
        try:
            text = line.decode("utf-8", "surrogatepass")
            doc, end = _scan(text, 0)
        except (StopIteration, ValueError, RecursionError):
            return json.loads(line)
        if end == len(text) or not text[end:].strip(" \t\n\r"):
            return doc
    return json.loads(line)


_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:")


def _string(text: str) -> bytes:
    """``text`` as a JSON string (``json.dumps``'s: ASCII, escapes), without the encoder for plain ids."""
    if _PLAIN.issuperset(text):
        return b'"%s"' % text.encode()
    return json.dumps(text).encode()


_RANK_KEYS = frozenset(("shared", "actions", "event_id"))
_REWARD_KEYS = frozenset(("event_id", "cost", "reward"))


def _checked_texts(shared, actions):
    """(shared, actions) as ``make_event`` checks and strips them (" " stripped; each one line, empty or
    starting at '|'), for a request of the usual types (a non-empty list of str, ``shared`` None or a str),
    in a few steps over all the actions at once; None when these checks do not pass: ``make_event`` then
    takes the request and says what is wrong with it."""
    if type(actions) is not list or not actions or not (shared is None or type(shared) is str):
        return None
    try:
        joined = "\n".join(actions)
    except TypeError:   # an action that is not a str
        return None
    if "\r" in joined or joined.count("\n") != len(actions) - 1:
        return None
    actions = tuple([a.strip(" ") for a in actions])
    for a in actions:
        if a and a[0] != "|":
            return None
    if shared is not None:
        shared = shared.strip(" ")
        if "\n" in shared or "\r" in shared or shared and shared[0] != "|":
            return None
    return shared, actions


def action_text(shared, actions, constant: str) -> bytes:
    """The event's action lines (``CbExploreAdf.action_lines`` of weight copy 0, without labels: each action's
    features, "|" when it has none, then the shared ones, then ``constant``, the policy's ``_constant(0)``), as
    the bytes of whole lines."""
    tail = " " + (shared or "")
    return ("\n".join([f"{a or '|'}{tail}".rstrip() + constant for a in actions]) + "\n").encode()


class OneLineLearning:
    """``Learner.process(batch, True)`` for a reward's one parsed line (``CbLearner.learn_parsed``'s
    ``process``), with the algorithm's ``run_chunk`` looked up once for its arguments' types: the
    compiled module's function (``aot.exported``), or under the JIT Numba's compiled overload, as
    engine/cb_single.py's ``EventScorer`` calls its entry. ``Learner.process`` finds it again on every
    call from the types of five tuples of arrays (``aot.args_key``: ~40 of the reward's ~100 µs on this
    2-core VM; the kernel's own work on one line is ~3 µs). The types do not change between calls: the
    model's table and the learner's settings and tally keep theirs (a pool that grows is a new array of
    the same type), and ``learn_parsed`` builds its batch of the same arrays every time; the function is
    looked up again when the model is replaced (``CbServing.use``). The steps are ``Learner.process``'s:
    the hashed indices to pool rows (``rows_for``: learning gives new features rows, in order), the
    kernel, the divergence flag read and cleared."""

    __slots__ = ("learner", "kernel", "call", "called")

    def __init__(self, learner):
        from olcli.engine import registry

        self.learner = learner
        self.kernel = registry.get(learner.model.algorithm).kernels().run_chunk
        self.call = None
        self.called = False      # the JIT: the kernel was called once with these types (compiled or loaded)

    def __call__(self, batch, learn: bool):
        learner = self.learner
        tally = learner.tally
        n = len(batch.labels)
        lo, hi = int(batch.row_ptr[0]), int(batch.row_ptr[n])
        batch = batch._replace(index=learner.model.pool.rows_for(batch.index[lo:hi], learn),
                               value=batch.value[lo:hi], row_ptr=batch.row_ptr - lo)
        predictions = np.empty(n)
        args = (learner.table(), learner.settings(learn), batch, tally, predictions)
        call = self.call
        if call is None:
            call = self._find(args)
        rows = call(*args)
        stats = tally.stats
        diverged_at = int(stats[S_DIVERGED]) - 1
        stats[S_DIVERGED] = 0.0
        return Processed(predictions, None, int(rows), diverged_at)

    def _find(self, args):
        """The compiled function for ``args``' types, kept in ``call``. Under the JIT the first call
        compiles or loads it (the kernel itself is called: found from the next call on). Where there
        is none (a compiled module without this export), the kernel itself, typing every call."""
        from olcli import aot
        from olcli.engine import jit

        kernel = self.kernel
        if jit.MODE == "aot":
            self.call = aot.exported(kernel, args) or kernel
            return self.call
        from numba import typeof

        overloads = getattr(kernel, "overloads", {})
        entry = getattr(overloads.get(tuple(typeof(a) for a in args)), "entry_point", None)
        if entry is not None or self.called:
            self.call = entry or kernel
        self.called = True
        return self.call or kernel


class CbRequestError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class CbServing:
    """Rank and reward for ``Served`` (olcli/served.py), which owns the model, its saves and reloads."""

    def __init__(self, served, seed=None):
        self.served = served
        self.options = served.options
        self.seed = int.from_bytes(os.urandom(4), "little") if seed is None else int(seed)
        self.run = os.urandom(3).hex()      # the made ids of one process differ from another's
        self.ranked = 0                     # events ranked so far: n of the next draw
        self.pending = OrderedDict()        # event id -> (shared, actions, action, probability, parsed line or None)
        self.dropped = 0
        self.learner = None
        self.scorer = None
        self.constant = ""                  # the end of every action line (the policy's constant feature, or "")
        self.learning = None
        self.uses = 0                       # models served so far: a kept parsed line is learned by its own

    def use(self, learner) -> None:
        """The served ``Learner`` (at start and after a reload) as its ``CbLearner``, and its event scorer
        (engine/cb_single.py: parse and score in one kernel call) when the model has one."""
        self.learner = CbLearner.from_learner(learner)
        self.learning = OneLineLearning(learner)
        self.uses += 1
        policy = self.learner.policy
        self.scorer = None
        self.constant = policy._constant(0)   # as policy.action_lines ends every line (tests/test_serve_cb.py)
        if EventScorer.supports(learner) and policy.rule != "bag" and policy.placed is None:
            self.scorer = EventScorer(learner)

    def store_state(self) -> None:
        self.learner.store_state()

    # --- requests ---

    def rank(self, doc) -> dict:
        event_id, action, probability, pmf = self._rank(doc)
        return {"event_id": event_id, "action": action, "probability": probability, "pmf": pmf}

    def _rank(self, doc) -> tuple:
        """(event id, action, its probability, the PMF as a list) of a rank request."""
        if type(doc) is not dict:
            raise CbRequestError(400, 'expected {"shared": "|ns f ...", "actions": ["|ns f ...", ...]}')
        for key in doc:
            if key not in _RANK_KEYS:
                raise CbRequestError(400, f"{key!r}: not a field of a rank request (shared, actions, event_id)")
        shared, actions = doc.get("shared"), doc.get("actions")
        texts = _checked_texts(shared, actions)
        if texts is None:   # a bad request (make_event says what), or one the quick check does not take
            try:
                event = make_event(shared, actions)
            except DataError as exc:
                raise CbRequestError(400, str(exc)) from None
            shared, actions = event.shared, event.actions
        else:
            shared, actions = texts
        event_id = doc.get("event_id")
        if event_id is not None:
            if type(event_id) is not str or not 0 < len(event_id) <= MAX_EVENT_ID:
                raise CbRequestError(400, f"event_id: a string of 1 to {MAX_EVENT_ID} characters (got {event_id!r})")
            if event_id in self.pending:
                raise CbRequestError(409, f"event_id {event_id!r} is already waiting for a reward")
        learner = self.learner
        k = len(actions)
        scorer = self.scorer
        scores = None
        if scorer is not None:   # one kernel call: the action lines parsed (and kept) and scored
            if scorer.score(action_text(shared, actions, self.constant)) == k:
                scores = scorer.scores[:k].tolist()
        try:
            ranking = learner.ranking_of(CbEvent(shared, actions)) if scores is None \
                else learner.ranking_from_scores(scores)
        except DataError as exc:   # a feature the parser refuses
            raise CbRequestError(400, str(exc)) from None
        n = self.ranked
        self.ranked = n + 1
        pmf = [0.0] * k
        if learner.explore:
            for a, p in ranking:
                pmf[a] = p
            u, _ = cb.merand48(self.seed + n)
            action = sample(ranking, u)
        else:
            action = ranking[0][0]
            pmf[action] = 1.0
        probability = pmf[action]
        if event_id is None:
            event_id = f"{self.run}-{n}"
        if self.options.learn:
            parsed = None
            if scores is not None and learner.learns_one_line:   # the played action's line, as parsed
                rows = scorer.rows
                start, end = rows[action], rows[action + 1]
                parsed = (self.uses, scorer.hashed[start:end].copy(), scorer.values[start:end].copy(),
                          int(scorer.counts[action]))
            pending = self.pending
            pending[event_id] = (shared, actions, action, probability, parsed)
            if len(pending) > self.options.cb_pending:
                pending.popitem(last=False)
                self.dropped += 1
        stats = self.served.stats
        stats.requests += 1
        stats.examples += 1
        return event_id, action, probability, pmf

    def reward(self, doc) -> dict:
        event_id, action, probability, cost = self._reward(doc)
        return {"event_id": event_id, "learned": True, "action": action, "probability": probability, "cost": cost}

    def _reward(self, doc) -> tuple:
        """(event id, action, probability, cost) of a reward request, learned."""
        if not self.options.learn:
            raise CbRequestError(409, "this server does not learn (start it with --learn -f OUT)")
        if type(doc) is not dict:
            raise CbRequestError(400, 'expected {"event_id": "...", "cost": number} (or "reward": number)')
        for key in doc:
            if key not in _REWARD_KEYS:
                raise CbRequestError(400, f"{key!r}: not a field of a reward (event_id, and cost or reward)")
        if ("cost" in doc) == ("reward" in doc):
            raise CbRequestError(400, 'give one of "cost" or "reward" (cost = -reward)')
        value = doc["cost"] if "cost" in doc else doc["reward"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
                or value in (float("inf"), float("-inf")):
            raise CbRequestError(400, f"{'cost' if 'cost' in doc else 'reward'}: expected a finite number "
                                      f"(got {value!r})")
        cost = float(value) if "cost" in doc else -float(value)
        event_id = doc.get("event_id")
        if not isinstance(event_id, str):
            raise CbRequestError(400, f"event_id: expected the string rank returned (got {event_id!r})")
        entry = self.pending.pop(event_id, None)
        if entry is None:
            raise CbRequestError(404, self._not_waiting(event_id))
        shared, actions, action, probability, parsed = entry
        served = self.served
        try:
            if parsed is not None and parsed[0] == self.uses:   # parsed for the model that learns it
                scorer = self.scorer
                self.learner.learn_parsed(len(actions), action, cost, probability, *parsed[1:],
                                          process=self.learning, learn_line=None if scorer is None else scorer.learn)
            else:
                self.learner.learn_event(CbEvent(shared, actions, action, cost, probability))
        except Diverged as exc:
            if not served.diverged:
                served.diverged = True
                served.log("diverged", "error", error=f"{exc}; the model is no longer saved (the last good save "
                                                      "is kept)")
        served.stats.requests += 1
        served.stats.learned += 1
        return event_id, action, probability, cost

    def _not_waiting(self, event_id: str) -> str:
        run, _, number = event_id.rpartition("-")
        limit = self.options.cb_pending
        if run == self.run and number.isdigit() and int(number) < self.ranked:
            return (f"event {event_id!r} is not waiting for a reward: it was rewarded already, or dropped (the "
                    f"table keeps the last {limit} events waiting, --cb-pending)")
        return (f"event {event_id!r} is not waiting for a reward: not ranked by this server, rewarded already, "
                f"or dropped (the table keeps the last {limit} events waiting, --cb-pending)")

    def handle(self, kind: str, doc) -> tuple:
        """(HTTP status, JSON reply) of a rank or reward request: the reply rendered (bytes; the reply
        of the line protocol with ``"model": {"generation": g}`` at its end), or an error's dict."""
        try:
            text = self._rendered(kind, doc)
        except CbRequestError as exc:
            self.served.log.client_error(f"cb_{kind}_refused", status=exc.status, error=str(exc))
            return exc.status, {"error": str(exc)}
        return 200, b"%s,\"model\":{\"generation\":%d}}" % (text[:-1], self.served.generation)

    def _rendered(self, kind: str, doc) -> bytes:
        """The JSON reply of a rank or reward request, written directly (the bytes ``json.dumps`` of
        ``rank``/``reward``'s dict with separators (",", ":") gives: keys in that order, floats as
        ``repr``, the event id as a JSON string)."""
        if kind == "rank":
            event_id, action, probability, pmf = self._rank(doc)
            return (b'{"event_id":%s,"action":%d,"probability":%s,"pmf":[%s]}'
                    % (_string(event_id), action, repr(probability).encode(), ",".join(map(repr, pmf)).encode()))
        event_id, action, probability, cost = self._reward(doc)
        return (b'{"event_id":%s,"learned":true,"action":%d,"probability":%s,"cost":%s}'
                % (_string(event_id), action, repr(probability).encode(), repr(cost).encode()))

    def reply_lines(self, data: bytes) -> bytes:
        """The line protocol for a CB model: one JSON object a line, a rank request (``actions``) or a reward
        (``event_id`` with ``cost``/``reward``); one reply line each, the JSON reply or ``error: ...``."""
        out = []
        for line in data.split(b"\n"):
            if not line.strip(b" \t\r"):
                continue
            try:
                doc = _document(line)
            except (ValueError, RecursionError) as exc:
                out.append(b"error: not a JSON object (a contextual-bandit model takes one JSON request a line): "
                           + str(exc).encode())
                continue
            kind = "rank" if isinstance(doc, dict) and "actions" in doc else "reward"
            try:
                out.append(self._rendered(kind, doc))
            except CbRequestError as exc:
                self.served.log.client_error(f"cb_{kind}_refused", status=exc.status, error=str(exc))
                out.append(b"error: " + str(exc).replace("\n", " ").encode("utf-8", "replace"))
        return b"\n".join(out) + b"\n" if out else b""

    def info(self) -> dict:
        return {"settings": self.learner.settings, "seed": self.seed, "ranked": self.ranked,
                "pending": len(self.pending), "pending_limit": self.options.cb_pending, "dropped": self.dropped}
