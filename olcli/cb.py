"""Contextual bandits with action-dependent features (VW's ``--cb_explore_adf``) over a ``Learner``.

One event (``olcli.cb_format.CbEvent``) has a shared context and K actions. Action a's regression
example is shared ∪ action a (VW's ``shared_feature_merger``: the shared line's namespaces are
appended to every action line, the shared constant is not), learned by the ``Learner`` with squared
loss. Per event, as VW 9.x does (``cb_explore_adf_*.cc``, ``cb_adf.cc``, ``explore_internal.h``):

1. scores s_a = the linear score of action a's example (unclipped, as ``csoaa_ldf`` ranks by
   ``partial_prediction``), ranked ascending (ties by action position);
2. the exploration rule turns the ranking into a PMF (listed in ranked order):
   ``epsilon``: ε/K each plus (1 − ε)/t on the t actions tied for the best;
   ``first``: uniform while τ > 0 (τ decreases per learned event), then all on the best;
   ``softmax``: p_a ∝ exp(−λ (s_a − min s)); ``squarecb``: with γ = gamma_scale · n^gamma_exponent
   (n = events learned), p_a = 1/(K + γ (s_a − s_best)) for a ≠ best, the rest on the best;
   ``bag`` (B members): each member votes 1/t for its t tied best actions, p = votes / B;
   then, for first/softmax/squarecb/bag, the projection onto p_a ≥ ε/K (``enforce_minimum_probability``);
3. VW's progress loss of the event, the IPS estimate of the PMF's cost: p_{a*} · c / p_logged;
4. if labelled, learning by ``cb_type``: ``mtr`` regresses only the chosen action on c with weight
   w / p · (events / actions) (running totals); ``ips`` regresses every action on c/p (chosen) or 0;
   ``dm`` on c (chosen) or 0 (VW's cb_adf trains the others toward 0); ``dr`` first lets a cost
   model ĝ (a second weight copy) learn the chosen action on c with weight w/p, taking ĝ_b in action
   order (the chosen one's before its update, the later ones after), then regresses every action on
   ĝ_b, the chosen one on ĝ_a + (c − ĝ_a)/p; squarecb learns without the 1/p factor except when the
   chosen action is the last line (VW's loop stops one short); a bag member learns the event k times,
   k ~ Poisson(1) drawn from VW's random state (seed 0, ``bs::weight_gen``; ``greedify``: member 0
   once), each member with its own mtr totals.

Weight copies (dr's cost model, bag's members) live in the same ``Learner`` as features whose
namespace names carry a copy prefix (``copy_features``), so all copies share one label range and the
learner's global state, as VW's copies do; VW places copies at index offsets instead, so hash
collisions (not the semantics) can differ. The learner's constant feature is one row for all copies,
so dr and bag take a learner without it: either VW's ``--noconstant``, or ``copy_constants=True``, which
gives every copy its own constant feature (namespace ``~k<copy>``, value 1, on every line), as VW does.

The oracle for all of this is ``tests/naive_cb.py``; ``tests/test_cb.py`` checks this module step by
step against it. ``--cb K`` and ``--cbify K`` (``placed=K``) put each action's copy of a single-line
example at action-specific indices as VW 9 does, and the weight copies at index offsets (``_place``);
``--cbify``'s simulation loop is ``olcli/cb_sim.py``.
"""

import math

import numpy as np

from olcli.cb_format import CbEvent
from olcli.errors import UsageError

RULES = ("epsilon", "first", "softmax", "squarecb", "bag")
CB_TYPES = ("mtr", "ips", "dm", "dr")
FLT_EPSILON = 1.1920929e-07
CONSTANT_HASH = 11650396   # VW's constant feature's index (constant_hash), before masking
# copy_constants: weight copy c's constant is feature "c" of namespace "~k<c>" (the learner's own constant off)
COPY_CONSTANT = "~k"
# bs.cc weight_gen: Poisson(1) CDF; the draw is the first k with u <= CDF[k] (8 beyond the table's tail)
POISSON_CDF = (0.3678794411714423, 0.7357588823428846, 0.9196986029286058, 0.9810118431238462,
               0.9963401531726563, 0.9994058151824183, 0.9999167588507120, 0.9999897508033254)


def merand48(state):
    """VW's LCG: x <- 0xeece66d5deece66d*x + 2147483647 mod 2^64; (23 bits of x >> 25 as [0, 1), x)."""
    x = (0xEECE66D5DEECE66D * state + 2147483647) & 0xFFFFFFFFFFFFFFFF
    return ((x >> 25) & 0x7FFFFF) / float(1 << 23), x


def copy_features(text, copy):
    """Features text moved to weight copy ``copy`` (VW: a feature offset per copy; here: the namespace
    names get the suffix ``~<copy>``, so copies are disjoint features of the one model, hashed under
    another namespace name, while the first letter, which interactions select by, is kept; the default
    namespace becomes ``~<copy>``)."""
    if copy == 0:
        return text
    return " ".join(_copied(tok, copy) if tok.startswith("|") else tok for tok in text.split(" "))


def _copied(tok, copy):
    name, colon, scale = tok[1:].partition(":")
    return f"|{name}~{copy}{colon}{scale}"


def enforce_minimum_probability(probs, epsilon):
    """Project probs onto {p_a >= ε/K} (VW's enforce_minimum_probability with zero entries counted)."""
    p = np.asarray(probs, dtype=np.float64).copy()
    if epsilon == 0.0:
        return p
    k = len(p)
    if epsilon > 0.999:
        return np.full(k, 1.0 / k)
    m = epsilon / k
    srt = np.sort(p)[::-1]
    running, rho, rho_sum = 0.0, 0, srt[0]
    for idx, v in enumerate(srt):
        running += v
        if v > ((k - idx - 1) * m + running - 1.0) / (idx + 1.0) + m:
            rho, rho_sum = idx, running
    tau = ((k - rho - 1.0) * m + rho_sum - 1.0) / (rho + 1.0)
    return np.maximum(p - tau, m)


class CbExploreAdf:
    """VW's ``--cb_explore_adf`` (one exploration rule, cb_type mtr/ips/dm) on top of a ``Learner``.

    ``learner`` must learn squared loss (interactions, n-grams and skips are scored by the kernel: see
    ``scores``). ``step(event)`` returns (pmf, loss):
    the PMF as (action position, probability) pairs in ranked order, computed before learning the
    event, and VW's progress loss of the event.
    """

    def __init__(self, learner, rule="epsilon", *, epsilon=None, tau=0, lam=1.0, gamma_scale=10.0,
                 gamma_exponent=0.5, cb_type="mtr", first_only=False, bag=0, greedify=False, random_seed=0,
                 copy_constants=False, placed=None):
        if rule not in RULES:
            raise UsageError(f"exploration rule must be one of {', '.join(RULES)} (got {rule!r})")
        if rule == "squarecb":
            cb_type = "mtr"   # VW: squarecb supports only mtr
        if cb_type not in CB_TYPES:
            raise UsageError(f"cb_type must be one of {', '.join(CB_TYPES)} here (got {cb_type!r})")
        if learner.loss != "squared":
            raise UsageError(f"contextual bandits regress costs with squared loss; the learner has {learner.loss}")
        if (cb_type == "dr" or rule == "bag") and learner.model.constant and not copy_constants and placed is None:
            raise UsageError(f"{'cb_type dr' if cb_type == 'dr' else 'bag'} needs a learner built with "
                             "constant=False (VW's --noconstant): its weight copies would share the learner's "
                             "one constant feature")
        if rule == "bag" and (not isinstance(bag, int) or bag < 1):
            raise UsageError(f"bag needs the number of members, 1 or more (got {bag!r})")
        if epsilon is None:
            epsilon = 0.05 if rule == "epsilon" else 0.0    # VW's defaults per rule
        if not 0.0 <= epsilon <= 1.0:
            raise UsageError(f"epsilon must be in [0, 1] (got {epsilon})")
        if copy_constants and learner.model.constant:
            raise UsageError("copy_constants replaces the learner's constant: give a learner with constant=False")
        self.copy_constants = copy_constants   # every weight copy its own constant feature (VW's constant per copy)
        self.placed = placed   # --cb K: K, the actions' features at action-specific indices (_place)
        self.learner = learner
        self.rule = rule
        self.epsilon = float(epsilon)
        self.tau = int(tau)
        self.lam = abs(float(lam))
        self.gamma_scale = float(gamma_scale)
        self.gamma_exponent = float(gamma_exponent)
        self.cb_type = cb_type
        self.first_only = first_only
        self.members = bag if rule == "bag" else 1
        self.greedify = greedify
        self.random_state = int(random_seed)
        self.copies = 2 if cb_type == "dr" else 1    # weight copies per member
        self.events_learned = 0     # squarecb's counter
        self.event_sum = [0] * self.members   # mtr's running totals, per member
        self.action_sum = [0] * self.members
        # VW's summary counters (shared_data)
        self.examples = 0
        self.labelled_weight = 0.0
        self.sum_loss = 0.0
        self.total_features = 0
        self.last_dr = None    # dr: the cost model's predictions ĝ of the last learned event
        self.current_features = 0   # the last event's features, each action line with the shared ones

    # --- lines ---

    def action_lines(self, event: CbEvent, labels=None, weights=None, copy=0):
        """Action a's regression line: ``[label weight ]`` + action features + shared features (+ the copy's
        own constant feature with ``copy_constants``)."""
        shared = event.shared or ""
        if self.placed is not None:
            copy = 0    # placed: the copy is an index offset (_place), not a renamed namespace
        out = []
        for a, feats in enumerate(event.actions):
            head = "" if labels is None else f"{labels[a]!r} {weights[a]!r} "
            out.append(head + copy_features(f"{feats or '|'} {shared}".rstrip(), copy) + self._constant(copy))
        return out

    def _constant(self, copy):
        return f" |{COPY_CONSTANT}{copy} c" if self.copy_constants else ""

    def scores(self, event: CbEvent, member=0):
        """Unclipped linear scores of the actions (of one bag member), and VW's feature count of the event.

        Without interactions, n-grams or skips: the dot products of the parsed lines with the weights. With
        them (features the engine makes inside its kernel): one predict-only kernel call with the clipping
        range opened to (−∞, ∞), so the kernel returns the raw score, and the features it counted."""
        lines = self.action_lines(event, copy=member * self.copies)
        batch, _ = self.learner.to_batch(lines)
        self._place(batch, range(len(lines)), member * self.copies)
        m = self.learner.model
        if m.interactions or m.ngram or m.skips:
            from olcli.engine.records import S_FEATURES, new_tally

            tally = new_tally()
            held = m.min_prediction, m.max_prediction
            m.min_prediction, m.max_prediction = -math.inf, math.inf
            try:
                done = self.learner.process(batch, False, tally)
            finally:
                m.min_prediction, m.max_prediction = held
            return np.asarray(done.predictions, dtype=np.float64).copy(), int(tally.stats[S_FEATURES])
        used = int(batch.row_ptr[-1])   # the parser's arrays have spare room past the last feature
        w = self.learner.weights_at(batch.index[:used].astype(np.int64))
        contrib = w * batch.value[:used]
        scores = np.array([contrib[batch.row_ptr[e]:batch.row_ptr[e + 1]].sum() for e in range(len(event.actions))])
        return scores, int(batch.feature_count.sum())

    # --- exploration ---

    def bag_pmf(self, event):
        """Votes of the members' rankings (1/t to each of a member's t tied best), then ε/K floor; sorted by
        (probability desc, summed score asc, action asc) as VW's sort_action_probs."""
        k = len(event.actions)
        votes, summed = np.zeros(k), np.zeros(k)
        for m in range(self.members):
            sc, _ = self.scores(event, m)
            summed += sc
            order = sorted(range(k), key=lambda a: (sc[a], a))
            if self.first_only:
                votes[order[0]] += 1.0
            else:
                t = self._tied(sc[order])
                for a in order[:t]:
                    votes[a] += 1.0 / t
        p = votes / votes.sum() if votes.sum() > 1e-6 else np.eye(1, k)[0]
        p = enforce_minimum_probability(p, self.epsilon)
        ranked = sorted(range(k), key=lambda a: (-p[a], summed[a], a))
        return [(a, float(p[a])) for a in ranked]

    @staticmethod
    def _tied(s):
        t = 1
        while t < len(s) and abs(s[t] - s[0]) <= FLT_EPSILON * max(abs(s[t]), abs(s[0])):
            t += 1
        return t

    def pmf(self, scores):
        k = len(scores)
        order = sorted(range(k), key=scores.__getitem__)   # stable: ties in action order (scores are finite)
        if self.rule == "epsilon":   # in Python floats (NumPy's numbers, without its per-call cost at a few actions)
            low = self.epsilon / k
            t = 1 if self.first_only else self._tied([scores[a] for a in order])
            high = low + (1.0 - self.epsilon) / t
            ranking = [(a, low) for a in order]
            for i in range(t):
                ranking[i] = (order[i], high)
            return ranking
        s = np.asarray(scores, dtype=np.float64)[order]
        if self.rule == "first":
            p = np.full(k, 1.0 / k) if self.tau > 0 else np.eye(1, k)[0]
            p = enforce_minimum_probability(p, self.epsilon)
        elif self.rule == "softmax":
            e = np.exp(-self.lam * (s - s.min()))
            p = enforce_minimum_probability(e / e.sum(), self.epsilon)
        else:
            gamma = self.gamma_scale * self.events_learned ** self.gamma_exponent
            best = int(np.argmin(s))
            p = 1.0 / (k + gamma * (s - s[best]))
            p[best] = 0.0
            p[best] = 1.0 - p.sum()
            p = enforce_minimum_probability(p, self.epsilon)
        return [(order[i], float(p[i])) for i in range(k)]

    # --- learning ---

    def _place(self, batch, actions, copy=0):
        """``--cb K`` and ``--cbify K`` (``placed=K``): every feature of action a's row moved to action a's
        weights as VW's cb_to_cb_adf and cbify do (cbify_adf_data::copy_example_to_adf), then to weight copy
        ``copy`` as VW's reductions below do (an index offset, ``ft_offset``): with W = weight copies per
        action (dr's cost model: 2 per member; bag: B members), the low bits of the hashed index that cover
        K·W (mask = 2^⌈log2(K·W+1)⌉ − 1) are replaced by a·W, then ``copy`` is added (masked to the table).
        The learner's constant row becomes VW's constant index (11650396, masked) first, so every action and
        copy has its own constant. Without ``placed``: nothing."""
        if self.placed is None:
            return
        bits = self.learner.model.bits
        used = int(batch.row_ptr[-1])
        index = batch.index[:used].astype(np.int64)
        rows = np.repeat(np.asarray(list(actions), dtype=np.int64), np.diff(np.asarray(batch.row_ptr, np.int64)))
        index = np.where(index == (1 << bits), CONSTANT_HASH & ((1 << bits) - 1), index)
        width = self.copies * self.members
        mask = (1 << (self.placed * width).bit_length()) - 1
        table = (1 << bits) - 1
        placed = (((index - (index & mask)) + rows * width) & table) + copy
        batch.index[:used] = (placed & table).astype(batch.index.dtype)

    def _learn(self, lines, actions, copy=0):
        """Learn labelled lines (one per action in ``actions``); the predictions made before each update."""
        if self.placed is None:
            return self.learner.learn(lines).predictions
        batch, _ = self.learner.to_batch(lines)
        self._place(batch, actions, copy)
        done = self.learner.process(batch, True)
        if done.diverged_at >= 0:
            from olcli.errors import Diverged

            raise Diverged("the model diverged: a prediction is not a finite number; "
                           + self.learner.divergence_advice())
        return done.predictions

    def _predict(self, lines, actions, copy=0):
        if self.placed is None:
            return self.learner.predict(lines)
        from olcli.engine.records import new_tally

        batch, _ = self.learner.to_batch(lines)
        self._place(batch, actions, copy)
        return self.learner.process(batch, False, new_tally()).predictions

    def _learn_member(self, event: CbEvent, member):
        k = len(event.actions)
        a, c, prob = event.chosen, float(event.cost), float(event.probability)
        if self.rule == "squarecb" and a != k - 1:
            prob = 1.0
        copy = member * self.copies
        if self.cb_type == "mtr":
            self.event_sum[member] += 1
            self.action_sum[member] += k
            weight = event.weight / prob * (self.event_sum[member] / self.action_sum[member])
            self._learn([self.action_lines(event, [c] * k, [weight] * k, copy)[a]], [a], copy)
            return
        targets = [0.0] * k
        if self.cb_type == "ips":
            targets[a] = c / prob
        elif self.cb_type == "dm":
            targets[a] = c
        else:
            unlabelled = self.action_lines(event, copy=copy + 1)
            learned = self.action_lines(event, [c] * k, [event.weight / prob] * k, copy + 1)
            for b in range(k):
                if b == a:   # get_cost_pred<true>: the prediction made before this update
                    targets[b] = float(self._learn([learned[b]], [b], copy + 1)[0])
                else:
                    targets[b] = float(self._predict([unlabelled[b]], [b], copy + 1)[0])
            self.last_dr = list(targets)
            targets[a] += (c - targets[a]) / prob
        self._learn(self.action_lines(event, targets, [event.weight] * k, copy), range(k), copy)

    def learn(self, event: CbEvent):
        for m in range(self.members):
            if self.rule == "bag" and not (self.greedify and m == 0):
                u, self.random_state = merand48(self.random_state)
                times = next((i for i, cdf in enumerate(POISSON_CDF) if u <= cdf), 8)
            else:
                times = 1
            for _ in range(times):
                self._learn_member(event, m)
        self.events_learned += 1
        if self.rule == "first" and self.tau > 0:
            self.tau -= 1

    def step(self, event: CbEvent, learn=True):
        """Predict the PMF, score it (VW's progress loss), learn if labelled (and ``learn``: VW's -t
        learns nothing); returns (pmf, loss)."""
        scores, features = self.scores(event)
        pmf = self.bag_pmf(event) if self.rule == "bag" else self.pmf(scores)
        loss = 0.0
        if event.labelled:
            loss = sum(p for act, p in pmf if act == event.chosen) * event.cost / event.probability
            self.labelled_weight += 1.0
            self.sum_loss += loss
            if learn:
                self.learn(event)
        self.examples += 1
        self.total_features += features
        self.current_features = features
        return pmf, loss

    # --- the state a model file keeps (olcli/cb_run.py) ---

    def state(self) -> dict:
        """What learning changed besides the weights: squarecb's counter, first's τ, mtr's totals per
        member, bag's random state."""
        return {"events_learned": self.events_learned, "tau": self.tau, "event_sum": list(self.event_sum),
                "action_sum": list(self.action_sum), "random_state": self.random_state}

    def restore(self, state: dict) -> None:
        self.events_learned = int(state["events_learned"])
        self.tau = int(state["tau"])
        self.event_sum = [int(x) for x in state["event_sum"]]
        self.action_sum = [int(x) for x in state["action_sum"]]
        self.random_state = int(state["random_state"])
        if len(self.event_sum) != self.members or len(self.action_sum) != self.members:
            raise UsageError(f"the model's CB state has {len(self.event_sum)} members, the policy {self.members}")

    @property
    def average_loss(self):
        """VW's ``average loss``: Σ loss / labelled events (None before any)."""
        return self.sum_loss / self.labelled_weight if self.labelled_weight else None


class CbAdf(CbExploreAdf):
    """VW's ``--cb_adf`` (no exploration): the actions ranked by cost estimate, then learning by ``cb_type``.

    ``step(event)`` returns (ranking, loss): (action position, score) pairs sorted by score ascending
    (ties by position), predicted before learning, and VW's progress loss (``cb_adf::update_statistics``)
    of the greedy action a: ĝ_a + [a = a*](c − ĝ_a)/p with cb_type dr (ĝ: the cost model's predictions
    used for the event's targets), else the IPS estimate [a = a*]·c/p. ``total_features`` counts every
    line's own features once (the shared line once, with its constant), as VW's summary does.
    """

    def __init__(self, learner, cb_type="mtr", **kwargs):
        super().__init__(learner, "epsilon", epsilon=0.0, cb_type=cb_type, **kwargs)

    def line_features(self, event: CbEvent):
        lines = ([event.shared or "|"] if event.shared is not None else []) + [f or "|" for f in event.actions]
        lines = [line + self._constant(0) for line in lines]
        batch, _ = self.learner.to_batch(lines)
        return int(batch.feature_count.sum())

    def step(self, event: CbEvent, learn=True):
        scores, self.current_features = self.scores(event)
        ranked = sorted(range(len(scores)), key=lambda a: (scores[a], a))
        loss = 0.0
        if event.labelled:
            self.last_dr = None
            if learn:
                self.learn(event)
            greedy, c, p = ranked[0], event.cost, event.probability
            if self.last_dr is not None:
                g = self.last_dr[greedy]
                loss = g + ((c - g) / p if greedy == event.chosen else 0.0)
            else:
                loss = c / p if greedy == event.chosen else 0.0
            self.labelled_weight += 1.0
            self.sum_loss += loss
        self.examples += 1
        self.total_features += self.line_features(event)
        return [(a, float(scores[a])) for a in ranked], loss


def run(events, policy: CbExploreAdf):
    """Run a stream of events through a policy; returns the list of (pmf, loss)."""
    return [policy.step(e) for e in events]


def ips_value(events, pmfs):
    """The IPS estimate of the average cost of the policies that produced ``pmfs`` on logged events,
    with a normal-approximation 95% interval: mean ± 1.96·sd/√n of the per-event estimates."""
    est = [sum(p for a, p in pmf if a == e.chosen) * e.cost / e.probability
           for e, pmf in zip(events, pmfs) if e.labelled]
    n = len(est)
    if n == 0:
        return None, (None, None)
    mean = sum(est) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in est) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n)
    return mean, (mean - half, mean + half)
