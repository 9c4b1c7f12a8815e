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
   then, for first/softmax/squarecb, the projection onto p_a ≥ ε/K (``enforce_minimum_probability``);
3. VW's progress loss of the event, the IPS estimate of the PMF's cost: p_{a*} · c / p_logged;
4. if labelled, learning by ``cb_type``: ``mtr`` regresses only the chosen action on c with weight
   w / p · (events / actions) (running totals); ``ips`` regresses every action on c/p (chosen) or 0;
   ``dm`` on c (chosen) or 0 (VW's cb_adf trains the others toward 0); squarecb learns without the
   1/p factor except when the chosen action is the last line (VW's loop stops one short).

The oracle for all of this is ``tests/naive_cb.py``; ``tests/test_cb.py`` checks this module step by
step against it. Not here yet: cb_type dr and bag (VW shares one label range between the weight
copies they need), ``--cb K``/``--cbify`` (VW's per-action hashed index placement), interactions.
"""

import math

import numpy as np

from olcli.cb_format import CbEvent
from olcli.errors import UsageError

RULES = ("epsilon", "first", "softmax", "squarecb")
CB_TYPES = ("mtr", "ips", "dm")
FLT_EPSILON = 1.1920929e-07


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

    ``learner`` must learn squared loss, without interactions (their features are made inside the
    kernel, so the unclipped score below could not see them). ``step(event)`` returns (pmf, loss):
    the PMF as (action position, probability) pairs in ranked order, computed before learning the
    event, and VW's progress loss of the event.
    """

    def __init__(self, learner, rule="epsilon", *, epsilon=None, tau=0, lam=1.0, gamma_scale=10.0,
                 gamma_exponent=0.5, cb_type="mtr", first_only=False):
        if rule not in RULES:
            raise UsageError(f"exploration rule must be one of {', '.join(RULES)} (got {rule!r})")
        if rule == "squarecb":
            cb_type = "mtr"   # VW: squarecb supports only mtr
        if cb_type not in CB_TYPES:
            raise UsageError(f"cb_type must be one of {', '.join(CB_TYPES)} here (got {cb_type!r})")
        if learner.loss != "squared":
            raise UsageError(f"contextual bandits regress costs with squared loss; the learner has {learner.loss}")
        if learner.model.interactions:
            raise UsageError("contextual bandits over a Learner do not take interactions yet")
        if epsilon is None:
            epsilon = 0.05 if rule == "epsilon" else 0.0    # VW's defaults per rule
        if not 0.0 <= epsilon <= 1.0:
            raise UsageError(f"epsilon must be in [0, 1] (got {epsilon})")
        self.learner = learner
        self.rule = rule
        self.epsilon = float(epsilon)
        self.tau = int(tau)
        self.lam = abs(float(lam))
        self.gamma_scale = float(gamma_scale)
        self.gamma_exponent = float(gamma_exponent)
        self.cb_type = cb_type
        self.first_only = first_only
        self.events_learned = 0     # squarecb's counter
        self.event_sum = 0          # mtr's running totals
        self.action_sum = 0
        # VW's summary counters (shared_data)
        self.examples = 0
        self.labelled_weight = 0.0
        self.sum_loss = 0.0
        self.total_features = 0

    # --- lines ---

    @staticmethod
    def action_lines(event: CbEvent, labels=None, weights=None):
        """Action a's regression line: ``[label weight ]`` + action features + shared features."""
        shared = event.shared or ""
        out = []
        for a, feats in enumerate(event.actions):
            head = "" if labels is None else f"{labels[a]!r} {weights[a]!r} "
            out.append(f"{head}{feats or '|'} {shared}".rstrip())
        return out

    def scores(self, event: CbEvent):
        """Unclipped linear scores of the actions, and VW's feature count of the event."""
        batch, _ = self.learner.to_batch(self.action_lines(event))
        used = int(batch.row_ptr[-1])   # the parser's arrays have spare room past the last feature
        w = self.learner.weights_at(batch.index[:used].astype(np.int64))
        contrib = w * batch.value[:used]
        scores = np.array([contrib[batch.row_ptr[e]:batch.row_ptr[e + 1]].sum() for e in range(len(event.actions))])
        return scores, int(batch.feature_count.sum())

    # --- exploration ---

    def pmf(self, scores):
        order = sorted(range(len(scores)), key=lambda a: (scores[a], a))
        s = np.asarray(scores, dtype=np.float64)[order]
        k = len(s)
        if self.rule == "epsilon":
            p = np.full(k, self.epsilon / k)
            if self.first_only:
                p[0] += 1.0 - self.epsilon
            else:
                t = 1
                while t < k and abs(s[t] - s[0]) <= FLT_EPSILON * max(abs(s[t]), abs(s[0])):
                    t += 1
                p[:t] += (1.0 - self.epsilon) / t
        elif self.rule == "first":
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

    def learn(self, event: CbEvent):
        k = len(event.actions)
        a, c, prob = event.chosen, float(event.cost), float(event.probability)
        if self.rule == "squarecb" and a != k - 1:
            prob = 1.0
        if self.cb_type == "mtr":
            self.event_sum += 1
            self.action_sum += k
            weight = event.weight / prob * (self.event_sum / self.action_sum)
            self.learner.learn([self.action_lines(event, [c] * k, [weight] * k)[a]])
        else:
            targets = [0.0] * k
            targets[a] = c / prob if self.cb_type == "ips" else c
            self.learner.learn(self.action_lines(event, targets, [event.weight] * k))
        self.events_learned += 1
        if self.rule == "first" and self.tau > 0:
            self.tau -= 1

    def step(self, event: CbEvent):
        """Predict the PMF, score it (VW's progress loss), learn if labelled; returns (pmf, loss)."""
        scores, features = self.scores(event)
        pmf = self.pmf(scores)
        loss = 0.0
        if event.labelled:
            loss = sum(p for act, p in pmf if act == event.chosen) * event.cost / event.probability
            self.labelled_weight += 1.0
            self.sum_loss += loss
            self.learn(event)
        self.examples += 1
        self.total_features += features
        return pmf, loss

    @property
    def average_loss(self):
        """VW's ``average loss``: Σ loss / labelled events (None before any)."""
        return self.sum_loss / self.labelled_weight if self.labelled_weight else None


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
