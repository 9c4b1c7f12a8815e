"""Slow pure-Python oracle of VW's contextual-bandit reductions.

Written from VW 9.x's definitions (read, not copied; the VW source files and
functions each part follows are named below). Everything here is plain Python over
a generic linear regressor, so it
can check olcli's reduction step by step:

* cost estimates per ``--cb_type`` (``cb_adf.cc`` ``learn_ips/dm/dr/mtr`` with
  ``gen_cs_example.cc``): :func:`targets_ips`, :func:`targets_dm`,
  :func:`targets_dr`, :func:`mtr_weight`, and :class:`CbAdf` which learns them;
* the exploration rules (``cb_explore_adf_{greedy,first,bag,softmax,squarecb}.cc``
  and ``explore_internal.h``): :func:`epsilon_greedy`, :func:`first_pmf`,
  :func:`bag_pmf`, :func:`softmax_pmf`, :func:`squarecb_pmf`,
  :func:`enforce_minimum_probability`, and :class:`CbExploreAdf` which predicts
  the PMF before learning each event, as VW does;
* VW's progress-table loss per event (:func:`loss_cb_adf`,
  :func:`loss_cb_explore_adf`), VW's sampler (:func:`merand48`,
  :func:`sample_after_normalizing`) and :func:`cbify`, the multiclass-to-bandit
  simulation of ``cbify.cc``.

An event is :class:`Event`: shared features, one feature dict per action, and
(when labelled) the chosen action's 0-based position, its cost and the logging
probability. Features are ``{name: value}`` dicts; the regression example of
action a is shared ∪ action a (VW's ``shared_feature_merger``) plus the constant
feature. The regressor is anything with ``predict(features) -> float`` (the
score that ranks actions), ``finalized(features)`` (the prediction an update and
a dr cost estimate use) and ``learn(features, label, weight)``;
:class:`SquaredSGD` is plain squared-loss SGD (w += lr·weight·(y − ŷ)·x), the
simplest one to reason about, and :class:`VWPlainSGD` is VW's own plain SGD
(``--sgd --power_t 0``, predictions clipped to the label range seen), with which
the oracle can be run side by side with VW 9.11.9
(``benchmarks/cb_vs_vw.py``, part 4).
"""

import math
from dataclasses import dataclass

FLT_MAX = 3.4028234663852886e38
CONSTANT = "constant"


class SquaredSGD:
    """Plain squared-loss SGD on named features: ŷ = Σ w_i x_i; learn does w_i += lr·weight·(y − ŷ)·x_i."""

    def __init__(self, lr=0.1):
        self.lr = lr
        self.w = {}

    def predict(self, features):
        return sum(self.w.get(k, 0.0) * v for k, v in features.items())

    def finalized(self, features):
        """The prediction the update and a cost estimate use (here the raw score)."""
        return self.predict(features)

    def predict_and_learn(self, features, label, weight=1.0):
        """One update; returns the prediction the update used (VW's gd learn: predict, then update)."""
        p = self.finalized(features)
        self.learn(features, label, weight)
        return p

    def learn(self, features, label, weight=1.0):
        g = self.lr * weight * (label - self.finalized(features))
        for k, v in features.items():
            self.w[k] = self.w.get(k, 0.0) + g * v


class LabelRange:
    """VW's shared_data label range: starts at [0, 0]; every label learned widens it (set_minmax, before
    the prediction is made); predictions are clipped to it (gd.cc finalize_prediction). One range is
    shared by every regressor of a run, as VW's is."""

    def __init__(self):
        self.lo = 0.0
        self.hi = 0.0

    def see(self, label):
        self.lo = min(self.lo, label)
        self.hi = max(self.hi, label)

    def clip(self, p):
        return self.hi if p > self.hi else (self.lo if p < self.lo else p)


class VWPlainSGD(SquaredSGD):
    """VW's ``--sgd --power_t 0 -l L`` on squared loss: w += 2·L·weight·(y − ŷ)·x with ŷ clipped to the
    shared :class:`LabelRange` (checked against VW 9.11.9: ``1 | a`` then ``0 2 | a b`` gives w_a = 0.12).

    ``predict`` is the raw score: csoaa_ldf ranks actions by ``partial_prediction`` (unclipped);
    ``finalized`` is the clipped ``pred.scalar`` that gd's update and dr's cost model (get_cost_pred) use.
    """

    def __init__(self, lr, label_range):
        super().__init__(2.0 * lr)
        self.range = label_range

    def finalized(self, features):
        return self.range.clip(self.predict(features))

    def learn(self, features, label, weight=1.0):
        self.range.see(label)
        super().learn(features, label, weight)

    def predict_and_learn(self, features, label, weight=1.0):
        """The label widens the range first, so the prediction returned is clipped to the widened range
        (found by running VW 9.11.9: dr's ĝ of the chosen action, ``--cb_explore_adf --softmax --lambda 2
        --cb_type dr --sgd --power_t 0 -l 0.1`` on tests/test_cb_cli.py's generated stream prints 0.255728;
        with ĝ clipped to the range before the cost, 0.255596)."""
        self.range.see(label)
        return super().predict_and_learn(features, label, weight)


@dataclass
class Event:
    """One CB event: shared features, per-action features, and the logged (action, cost, probability)."""
    shared: dict
    actions: list
    chosen: int | None = None      # 0-based position of the logged action, None for a test event
    cost: float = 0.0
    probability: float = 0.0
    weight: float = 1.0

    @property
    def labelled(self):
        # cb_label::is_test_label: a cost was observed and its probability is > 0
        return self.chosen is not None and self.cost != FLT_MAX and self.probability > 0


def action_features(event, a, constant=True):
    """shared ∪ action a (+ the constant feature): the regression example VW builds for action a."""
    f = dict(event.shared)
    for k, v in event.actions[a].items():
        f[k] = f.get(k, 0.0) + v
    if constant:
        f[CONSTANT] = 1.0
    return f


def rank(scores):
    """csoaa_ldf rank: (action, score) sorted by score ascending, ties by action index."""
    return sorted(enumerate(scores), key=lambda t: (t[1], t[0]))


def safe_probability(p):
    """gen_cs_example.cc safe_probability: p <= 0 becomes 1e-3."""
    return p if p > 0 else 1e-3


# --------------------------------------------------------------------------- cost estimates

def targets_ips(event, clip_p=0.0):
    """ips: x_{a*} = c / max(p, clip_p); x_a = 0 for the other actions (all are regressed)."""
    x = [0.0] * len(event.actions)
    x[event.chosen] = event.cost / safe_probability(max(event.probability, clip_p))
    return x


def targets_dm(event):
    """dm (ADF): x_{a*} = c; x_a = 0 for the other actions (all are regressed)."""
    x = [0.0] * len(event.actions)
    x[event.chosen] = event.cost
    return x


def targets_dr(event, g_pred, clip_p=0.0):
    """dr: x_a = ĝ_a, and x_{a*} = ĝ_{a*} + (c − ĝ_{a*}) / max(p, clip_p).

    ĝ = the cost regressor's predictions."""
    x = list(g_pred)
    a = event.chosen
    x[a] = g_pred[a] + (event.cost - g_pred[a]) / max(event.probability, clip_p)
    return x


def mtr_weight(event, events_seen, actions_seen, clip_p=0.0):
    """mtr: weight of the chosen action's regression, w·(1/max(p, clip_p))·(events/actions).

    events and actions are running totals including this event."""
    return event.weight / max(event.probability, clip_p) * (events_seen / actions_seen)


class CbAdf:
    """``--cb_adf --cb_type T`` over generic regressors: scores, then the cb_type's regressions.

    ``policy`` is the regressor whose scores rank the actions (VW's weight copy 0); ``dr`` uses a
    second one, ``cost_model`` (copy 1). ``learn`` returns the scores predicted before the update.
    """

    def __init__(self, cb_type="mtr", policy=None, cost_model=None, clip_p=0.0, constant=True):
        if cb_type not in ("ips", "dm", "dr", "mtr"):
            raise ValueError(f"cb_type {cb_type!r}")
        self.cb_type = cb_type
        self.policy = policy if policy is not None else SquaredSGD()
        self.cost_model = cost_model if cost_model is not None else (SquaredSGD() if cb_type == "dr" else None)
        self.clip_p = clip_p
        self.constant = constant
        self.events_seen = 0
        self.actions_seen = 0
        self.last_dr = None   # DR cost-model predictions of the last learned event (for its loss)

    def features(self, event):
        return [action_features(event, a, self.constant) for a in range(len(event.actions))]

    def scores(self, event):
        return [self.policy.predict(f) for f in self.features(event)]

    def learn(self, event):
        feats = self.features(event)
        scores = [self.policy.predict(f) for f in feats]
        self.last_dr = None
        if not event.labelled:
            return scores
        a = event.chosen
        if self.cb_type == "mtr":
            self.events_seen += 1
            self.actions_seen += len(event.actions)
            w = mtr_weight(event, self.events_seen, self.actions_seen, self.clip_p)
            self.policy.learn(feats[a], event.cost, w)
            return scores
        if self.cb_type == "ips":
            x = targets_ips(event, self.clip_p)
        elif self.cb_type == "dm":
            x = targets_dm(event)
        else:
            g = []
            for b, f in enumerate(feats):
                if b == a:  # get_cost_pred<true>: learn the observed action with weight 1/p; ĝ is gd's prediction
                    g.append(self.cost_model.predict_and_learn(f, event.cost, event.weight / event.probability))
                else:
                    g.append(self.cost_model.finalized(f))
            self.last_dr = g
            x = targets_dr(event, g, self.clip_p)
        for f, target in zip(feats, x):
            self.policy.learn(f, target, event.weight)
        return scores


# --------------------------------------------------------------------------- exploration rules

def enforce_minimum_probability(pmf, epsilon, consider_zero=True):
    """Projection of pmf onto {p_a >= epsilon/K} (explore_internal.h enforce_minimum_probability)."""
    p = list(pmf)
    if epsilon == 0.0:
        return p
    k = len(p)
    support = k if consider_zero else k - sum(1 for v in p if v == 0.0)
    if epsilon > 0.999:
        return [1.0 / support if (consider_zero or v > 0) else v for v in p]
    m = epsilon / support
    srt = sorted(p, reverse=True)
    running, rho, rho_sum = 0.0, 0, srt[0]
    for idx, v in enumerate(srt):
        if not consider_zero and v == 0.0:
            break
        running += v
        if v > ((support - idx - 1) * m + running - 1.0) / (idx + 1.0) + m:
            rho, rho_sum = idx, running
    tau = ((support - rho - 1.0) * m + rho_sum - 1.0) / (rho + 1.0)
    return [max(v - tau, m) if (consider_zero or v > 0) else v for v in p]


def same_rel(a, b):
    """VW::math::are_same_rel: |a − b| <= FLT_EPSILON·max(|a|, |b|)."""
    return abs(a - b) <= 1.1920929e-07 * max(abs(a), abs(b))


def n_tied(ranked):
    """fill_tied: how many leading entries of a ranked list have the first entry's score."""
    t = 1
    for _, s in ranked[1:]:
        if same_rel(s, ranked[0][1]):
            t += 1
        else:
            break
    return t


def epsilon_greedy(ranked, epsilon, first_only=False):
    """p = ε/K each, plus (1 − ε)/t on each of the t actions tied for the best (first_only: all on position 0)."""
    k = len(ranked)
    probs = [epsilon / k] * k
    if first_only:
        probs[0] += 1.0 - epsilon
    else:
        t = n_tied(ranked)
        for i in range(t):
            probs[i] += (1.0 - epsilon) / t
    return [(a, p) for (a, _), p in zip(ranked, probs)]


def first_pmf(ranked, tau, epsilon=0.0):
    """--first: uniform while tau > 0, else all mass on the best; then the minimum-probability projection."""
    k = len(ranked)
    probs = [1.0 / k] * k if tau > 0 else [1.0] + [0.0] * (k - 1)
    probs = enforce_minimum_probability(probs, epsilon, True)
    return [(a, p) for (a, _), p in zip(ranked, probs)]


def softmax_pmf(ranked, lam=1.0, epsilon=0.0):
    """--softmax: p_a ∝ exp(−λ (s_a − min s)), then the minimum-probability projection."""
    lam = abs(lam)
    lo = min(s for _, s in ranked)
    e = [math.exp(-lam * (s - lo)) for _, s in ranked]
    z = sum(e)
    probs = enforce_minimum_probability([v / z for v in e], epsilon, True)
    return [(a, p) for (a, _), p in zip(ranked, probs)]


def squarecb_gamma(gamma_scale, counter, gamma_exponent=0.5):
    """γ = gamma_scale · t^gamma_exponent, t = events learned so far (0 for the first event)."""
    return gamma_scale * counter ** gamma_exponent


def squarecb_pmf(ranked, gamma, epsilon=0.0):
    """--squarecb: b = first minimal score; p_a = 1/(K + γ(s_a − s_b)) for a != b; p_b = 1 − Σ the others."""
    k = len(ranked)
    b = min(range(k), key=lambda i: (ranked[i][1], i))
    probs = [0.0] * k
    for i in range(k):
        if i != b:
            probs[i] = 1.0 / (k + gamma * (ranked[i][1] - ranked[b][1]))
    probs[b] = 1.0 - sum(probs)
    probs = enforce_minimum_probability(probs, epsilon, True)
    return [(a, p) for (a, _), p in zip(ranked, probs)]


def bag_pmf(member_rankings, epsilon=0.0, first_only=False):
    """--bag: each member votes 1/t for its t tied best actions (first_only: 1 for its first); p = votes/B.

    Then the minimum-probability projection; sorted by (probability desc, summed score asc, action asc).
    """
    k = len(member_rankings[0])
    votes = [0.0] * k
    summed = [0.0] * k
    for ranked in member_rankings:
        for a, s in ranked:
            summed[a] += s
        if first_only:
            votes[ranked[0][0]] += 1.0
        else:
            t = n_tied(ranked)
            for a, _ in ranked[:t]:
                votes[a] += 1.0 / t
    total = sum(votes)
    probs = [v / total for v in votes] if total > 1e-6 else [1.0] + [0.0] * (k - 1)
    probs = enforce_minimum_probability(probs, epsilon, True)
    return sorted(enumerate(probs), key=lambda t: (-t[1], summed[t[0]], t[0]))


# --------------------------------------------------------------------------- progress-table loss

def ips_estimate(event, action):
    """[action = a*]·c/p."""
    return event.cost / event.probability if action == event.chosen else 0.0


def loss_cb_adf(event, scores, dr_pred=None):
    """cb_adf update_statistics: greedy action a; DR estimate ĝ_a + [a=a*](c − ĝ_a)/p with dr, else IPS."""
    if not event.labelled:
        return 0.0
    a = rank(scores)[0][0]
    if dr_pred is None:
        return ips_estimate(event, a)
    g = dr_pred[a]
    return g + ((event.cost - g) / event.probability if a == event.chosen else 0.0)


def loss_cb_explore_adf(event, pmf):
    """cb_explore_adf _update_stats: Σ_a p_a·[a=a*]·c/p_logged = p_{a*}·c/p_logged (action weights 1)."""
    if not event.labelled:
        return 0.0
    return sum(p * ips_estimate(event, a) for a, p in pmf)


class CbExploreAdf:
    """``--cb_explore_adf`` with one exploration rule over :class:`CbAdf` learners.

    ``step(event)`` computes the PMF with the model as it is (VW predicts before learning), then
    learns the event if it is labelled, and returns (pmf, loss). Rules: ``("epsilon", ε)``,
    ``("first", τ, ε)``, ``("softmax", λ, ε)``, ``("squarecb", gamma_scale, ε)``,
    ``("bag", B, ε, draws)`` with ``draws(member) -> how many times member learns`` (VW: Poisson(1)).
    """

    def __init__(self, rule, cb_type="mtr", make_regressor=SquaredSGD, constant=True, first_only=False):
        self.rule = rule
        kind = rule[0]
        if kind == "squarecb":
            cb_type = "mtr"
        n = rule[1] if kind == "bag" else 1
        self.members = [CbAdf(cb_type, make_regressor(), make_regressor() if cb_type == "dr" else None,
                              constant=constant) for _ in range(n)]
        self.first_only = first_only
        self.tau = rule[1] if kind == "first" else 0
        self.counter = 0

    def pmf(self, event):
        kind = self.rule[0]
        if kind == "bag":
            return bag_pmf([rank(m.scores(event)) for m in self.members], self.rule[2], self.first_only)
        ranked = rank(self.members[0].scores(event))
        if kind == "epsilon":
            return epsilon_greedy(ranked, self.rule[1], self.first_only)
        if kind == "first":
            return first_pmf(ranked, self.tau, self.rule[2])
        if kind == "softmax":
            return softmax_pmf(ranked, self.rule[1], self.rule[2])
        if kind == "squarecb":
            return squarecb_pmf(ranked, squarecb_gamma(self.rule[1], self.counter), self.rule[2])
        raise ValueError(kind)

    def learn(self, event):
        kind = self.rule[0]
        if kind == "squarecb":
            # every action label but the last line's gets probability 1 (no importance weighting)
            if event.chosen != len(event.actions) - 1:
                event = Event(event.shared, event.actions, event.chosen, event.cost, 1.0, event.weight)
            self.members[0].learn(event)
            self.counter += 1
        elif kind == "bag":
            draws = self.rule[3]
            for i, m in enumerate(self.members):
                for _ in range(draws(i)):
                    m.learn(event)
        else:
            self.members[0].learn(event)
            if kind == "first" and self.tau > 0:
                self.tau -= 1

    def step(self, event):
        pmf = self.pmf(event)
        loss = loss_cb_explore_adf(event, pmf)
        if event.labelled:
            self.learn(event)
        return pmf, loss


# --------------------------------------------------------------------------- sampling and cbify

def merand48(state):
    """VW's LCG: x ← 0xeece66d5deece66d·x + 2147483647 (mod 2^64); returns (float in [0,1), new x)."""
    x = (0xEECE66D5DEECE66D * state + 2147483647) & 0xFFFFFFFFFFFFFFFF
    mantissa = (x >> 25) & 0x7FFFFF
    return mantissa / float(1 << 23), x


def sample_after_normalizing(seed, probs):
    """Index of the first position whose running sum of probs exceeds merand48_noadvance(seed)·Σp."""
    probs = [max(p, 0.0) for p in probs]
    total = sum(probs)
    if total == 0:
        return 0
    u, _ = merand48(seed)
    draw = min(total * u, total)
    running = 0.0
    for i, p in enumerate(probs):
        running += p
        if running > draw:
            return i
    return len(probs) - 1


# cbify's app_seed, uniform_hash("vw", 2, 0) = murmur3_32(b"vw", seed 0): the value VW 9.11.9 gives
# (vowpalwabbit.Workspace().hash_space("vw") with hash_seed 0), recorded here.
VW_APP_SEED = 53980556


def cbify_action_index(index, action, k, width=1, bits=18):
    """Where VW puts feature ``index`` in action ``action``'s copy (cbify_adf_data::copy_example_to_adf):
    the low bits covering k·width are replaced by action·width — mask = the smallest 2^m − 1 >= k·width.
    Features whose hashed indices differ only in those low bits share one weight per action (numeric
    feature names 1, 2, … in one namespace hash to consecutive indices, so most of them do)."""
    mask = (1 << (k * width).bit_length()) - 1
    return ((index - (index & mask)) + action * width) & ((1 << bits) - 1)


def vw_action_copies(features, k, bits=18):
    """K action copies of an example given as {hashed index: value} (constant included), as VW's cbify
    makes them; colliding indices add up."""
    copies = []
    for a in range(k):
        f = {}
        for i, v in features.items():
            j = cbify_action_index(i, a, k, 1, bits)
            f[j] = f.get(j, 0.0) + v
        copies.append(f)
    return copies


def named_action_copies(features, k):
    """K action copies keeping every named feature apart (no collisions), with a constant per copy."""
    return [{f"{a}^{name}": v for name, v in {**features, CONSTANT: 1.0}.items()} for a in range(k)]


def cbify(examples, k, explorer, app_seed=VW_APP_SEED, loss0=0.0, loss1=1.0, copies=named_action_copies):
    """``--cbify K``: per multiclass example (label 1..K, features), K action copies of the features
    (``copies``: :func:`named_action_copies`, or :func:`vw_action_copies` for VW's exact placement of
    hashed indices), the explorer's
    PMF, an action sampled with seed app_seed + example counter, cost loss0 if it is the label else
    loss1, and learning on that. Returns the progressive 0/1 loss of the sampled actions (VW's
    ``average loss``) and the sampled actions. Each action copy carries its own constant feature
    (VW moves the constant with the other indices), so the explorer is built with constant=False."""
    if any(m.constant for m in explorer.members):
        raise ValueError("cbify: build the explorer with constant=False (each action copy has its own constant)")
    misses, chosen = 0, []
    for n, (label, feats) in enumerate(examples):
        actions = copies(feats, k)
        event = Event({}, actions)
        pmf = explorer.pmf(event)
        i = sample_after_normalizing(app_seed + n, [p for _, p in pmf])
        action, p = pmf[i]
        cost = loss0 if action + 1 == label else loss1
        explorer.learn(Event({}, actions, action, cost, p))
        misses += action + 1 != label
        chosen.append(action + 1)
    return misses / len(examples), chosen


# --------------------------------------------------------------------------- --eval (legacy cb_algs)

def eval_cost_model_index(index, action, k, bits=18):
    """Where VW's legacy ``--cb K`` dr cost model keeps action ``action`` (1..K)'s copy of feature ``index``:
    ``get_cost_pred(scorer, ..., action, base=K)`` learns/predicts at offset action − 1 + K."""
    return (index + action - 1 + k) & ((1 << bits) - 1)


def evaluate(examples, k, regressor, cb_type="dr", bits=18):
    """``--cb K --eval`` (``cb_algs.cc`` learn_eval with ``gen_cs_example_dr<true>``): per example
    (π, logged action a* 1..K, cost c, probability p, {hashed index: value} with the constant), in action
    order 1..K the cost model ĝ predicts action i's copy of the features — a* is learned (target c, weight
    1/p) and its prediction is the one the update used; the others are predictions (after a*'s update when
    they come later). The example's loss is ĝ_π + [π = a*](c − ĝ_π)/p (dr) or [π = a*]·c/p (ips), VW's
    ``get_cost_estimate``. Returns the per-example losses (VW's average loss is their mean)."""
    losses = []
    for pi, a_star, c, p, feats in examples:
        if cb_type == "ips":
            losses.append(c / p if pi == a_star else 0.0)
            continue
        g = {}
        for i in range(1, k + 1):
            placed = {}
            for j, v in feats.items():
                m = eval_cost_model_index(j, i, k, bits)
                placed[m] = placed.get(m, 0.0) + v
            if i == a_star:
                g[i] = regressor.predict_and_learn(placed, c, 1.0 / p)
            else:
                g[i] = regressor.finalized(placed)
        losses.append(g[pi] + ((c - g[pi]) / p if pi == a_star else 0.0))
    return losses
