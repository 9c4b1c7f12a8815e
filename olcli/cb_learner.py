"""Contextual bandits in Python: ``olcli.Learner(..., cb=...)`` returns a ``CbLearner``.

A ``CbLearner`` is VW's ``--cb_explore_adf`` (or ``--cb_adf``) reduction (``olcli.cb``) over a base
``Learner`` that regresses costs with squared loss, the same objects ``olcli train --cb-explore-adf``
and ``olcli vw --cb_explore_adf`` run (olcli/cb_run.py). One event is a shared context and K actions,
each given as VW features text starting at its namespace bar (``"|user age:3 tall"``,
``"|item id=42"``): the text after the label of the ``shared`` line and of each action line of VW's
multi-line format, so ``learn(shared, actions, chosen, cost, probability)`` learns exactly what the
ADF block::

    shared <shared>
    <actions[0]>
    <chosen>:<cost>:<probability> <actions[chosen]>
    ...

teaches ``olcli train --cb-explore-adf`` (the label goes on the chosen action's line; its position
counts). ``save`` writes the file those commands write with ``-f`` (the reduction's settings and state in
the model's ``cb`` field): the same bytes from the same events and options (tests/test_cb_api.py).

``cb`` is ``"cb_explore_adf"``, ``"cb_adf"`` or a dict of the reduction's settings, the keys of the model
file's ``cb.settings`` (and of VW's options): ``reduction`` (``cb_explore_adf`` default, or ``cb_adf``),
``rule`` (``epsilon`` default, ``first``, ``bag``, ``softmax``, ``squarecb``), ``cb_type`` (``mtr`` default,
``ips``, ``dm``, ``dr``), ``epsilon`` (VW's default per rule: 0.05 for epsilon-greedy, else 0), ``first``
(τ, with rule first), ``bag`` (members, with rule bag), ``lambda`` (softmax, 1), ``gamma_scale`` (10) and
``gamma_exponent`` (0.5) (squarecb), ``first_only``, ``greedify`` (bag), ``random_seed`` (bag's Poisson
draws, 0). The formulas are in olcli/cb.py's docstring.

``predict`` returns the PMF over the given actions (in their order); with ``cb_adf`` (no exploration)
it is 1 on the best-ranked action. ``ranking`` gives it as VW's ``-p`` does: (action, probability) pairs
most likely first (``cb_adf``: (action, score) best first). ``sample`` draws an action from a ranking as
VW does (``sample_after_normalizing``). No scikit-learn estimator: scikit-learn has no bandit interface
(``fit(X, y)`` has no place for the logged action, its probability and the PMF), see docs/python.md.

This module imports no ``Learner``: ``olcli/learner.py`` builds the base learner and hands it here, so
the learner and its reduction do not import each other.
"""

import math

import numpy as np

from olcli import cb
from olcli.cb_format import CbEvent
from olcli.errors import DataError, UsageError

REDUCTIONS = ("cb_explore_adf", "cb_adf")
KEYS = ("reduction", "rule", "cb_type", "epsilon", "first", "bag", "lambda", "gamma_scale", "gamma_exponent",
        "first_only", "greedify", "random_seed")


def _number(cb_options, key, kind, default, low=None):
    if key not in cb_options or cb_options[key] is None:
        return default
    value = cb_options[key]
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise UsageError(f"cb[{key!r}] must be a number (got {value!r})")
    if kind is int and float(value) != int(value):
        raise UsageError(f"cb[{key!r}] must be a whole number (got {value!r})")
    number = kind(value)
    if not math.isfinite(number):
        raise UsageError(f"cb[{key!r}] must be a finite number (got {value!r})")
    if low is not None and number < low:
        raise UsageError(f"cb[{key!r}] must be at least {low} (got {value!r})")
    return number


def settings_of(cb_options, constant=True) -> dict:
    """``cb=`` -> the reduction's settings, the dict ``olcli vw``/``olcli train`` store in the model's
    ``cb.settings`` for the same options (same keys, types and VW defaults). ``constant``: the learner's
    ``constant`` option (False: VW's ``--noconstant``)."""
    if isinstance(cb_options, str):
        cb_options = {"reduction": cb_options}
    if not isinstance(cb_options, dict):
        raise UsageError(f"cb must be 'cb_explore_adf', 'cb_adf' or a dict of settings (got {cb_options!r})")
    unknown = [k for k in cb_options if k not in KEYS]
    if unknown:
        raise UsageError(f"cb[{unknown[0]!r}]: not a contextual-bandit setting; the settings are {', '.join(KEYS)}")
    reduction = cb_options.get("reduction", "cb_explore_adf")
    if reduction not in REDUCTIONS:
        raise UsageError(f"cb['reduction'] must be one of {', '.join(REDUCTIONS)} (got {reduction!r}; VW's "
                         "single-line --cb K runs under olcli vw)")
    rule = cb_options.get("rule", "epsilon")
    if rule not in cb.RULES:
        raise UsageError(f"cb['rule'] must be one of {', '.join(cb.RULES)} (got {rule!r})")
    if reduction == "cb_adf":
        explore = [k for k in ("rule", "epsilon", "first", "bag", "lambda", "gamma_scale", "gamma_exponent",
                               "first_only", "greedify") if k in cb_options]
        if explore:
            raise UsageError(f"cb[{explore[0]!r}]: an exploration setting; it needs the cb_explore_adf reduction "
                             "(cb_adf only ranks)")
    cb_type = cb_options.get("cb_type", "mtr")
    if cb_type not in cb.CB_TYPES:
        raise UsageError(f"cb['cb_type'] must be one of {', '.join(cb.CB_TYPES)} (got {cb_type!r})")
    if rule == "squarecb" and cb_type != "mtr":
        raise UsageError(f"cb['rule'] squarecb learns with cb_type mtr only (given {cb_type!r})")
    for key in ("first", "bag"):
        if key in cb_options and rule != key:
            raise UsageError(f"cb[{key!r}] goes with cb['rule'] = {key!r} (the rule is {rule!r})")
    if rule in ("first", "bag") and cb_options.get(rule) is None:
        raise UsageError(f"cb['rule'] {rule!r} needs cb[{rule!r}]: the number of "
                         f"{'uniform events' if rule == 'first' else 'bag members'}")
    for key in ("first_only", "greedify"):
        if not isinstance(cb_options.get(key, False), bool):
            raise UsageError(f"cb[{key!r}] must be True or False (got {cb_options[key]!r})")
    return {
        "reduction": reduction, "rule": rule if reduction == "cb_explore_adf" else None, "cb_type": cb_type,
        "epsilon": _number(cb_options, "epsilon", float, None, low=0.0),
        "first": _number(cb_options, "first", int, 0, low=1) if rule == "first" else 0,
        "bag": _number(cb_options, "bag", int, 0, low=1) if rule == "bag" else 0,
        "lambda": _number(cb_options, "lambda", float, 1.0),
        "gamma_scale": _number(cb_options, "gamma_scale", float, 10.0, low=0.0),
        "gamma_exponent": _number(cb_options, "gamma_exponent", float, 0.5, low=0.0),
        "first_only": cb_options.get("first_only", False), "greedify": cb_options.get("greedify", False),
        "random_seed": _number(cb_options, "random_seed", int, 0),
        "actions": 0,
        # olcli vw's --cbify / --eval settings (olcli/cb_sim.py), off for an ADF reduction
        "eval": False, "loss0": 0.0, "loss1": 1.0, "flip_loss_sign": False,
        # dr and bag keep weight copies: each gets its own constant feature (the learner's is off)
        "copy_constants": bool(constant) and (cb_type == "dr" or rule == "bag" and reduction != "cb_adf"),
    }


def base_options(settings, options: dict) -> dict:
    """The base ``Learner``'s keyword options for a reduction: squared loss (CB regresses costs), and the
    learner's constant off when every weight copy gets its own (as olcli/cb_run.py builds it)."""
    loss = options.get("loss")
    if loss not in (None, "squared"):
        raise UsageError(f"loss {loss!r}: a contextual-bandit learner regresses costs with squared loss")
    for key in ("oaa", "softmax"):
        if options.get(key) is not None:
            raise UsageError(f"{key}: not with cb (a contextual-bandit learner has one output per action)")
    out = dict(options, loss="squared")
    if settings["copy_constants"]:
        out["constant"] = False
    return out


def policy_of(learner, settings):
    """The reduction over ``learner`` (``olcli.cb.CbExploreAdf`` or ``CbAdf``) for stored ``settings``."""
    kwargs = dict(cb_type=settings["cb_type"], random_seed=settings["random_seed"],
                  copy_constants=settings.get("copy_constants", False))
    if settings["reduction"] == "cb_adf":
        return cb.CbAdf(learner, **kwargs)
    if settings["reduction"] != "cb_explore_adf":
        raise UsageError(f"a --{settings['reduction']} model: the Python API and olcli serve take action-dependent "
                         "features (cb_explore_adf or cb_adf); olcli vw runs it")
    return cb.CbExploreAdf(learner, settings["rule"], epsilon=settings["epsilon"], tau=settings["first"],
                           lam=settings["lambda"], gamma_scale=settings["gamma_scale"],
                           gamma_exponent=settings["gamma_exponent"], first_only=settings["first_only"],
                           bag=settings["bag"], greedify=settings["greedify"], **kwargs)


def _text(value, what) -> str:
    if not isinstance(value, str):
        raise DataError(f"{what}: expected VW features text (a str starting with '|'), got {type(value).__name__}")
    text = value.strip(" ")
    if "\n" in text or "\r" in text:
        raise DataError(f"{what}: one line of features (it contains a line break): {value[:80]!r}")
    if text and not text.startswith("|"):
        raise DataError(f"{what}: features text starts with a namespace bar '|' (VW's '|ns f1 f2:0.5'), "
                        f"got {value[:80]!r}")
    return text


def make_event(shared, actions, chosen=None, cost=None, probability=None, weight=1.0) -> CbEvent:
    """A checked event: features texts, and when ``chosen`` is given its cost and probability."""
    if isinstance(actions, str) or not hasattr(actions, "__len__"):
        raise DataError("actions: expected a list of VW features texts, one per action")
    if len(actions) == 0:
        raise DataError("actions: an event needs at least one action")
    feats = tuple(_text(a, f"action {k}") for k, a in enumerate(actions))
    shared = None if shared is None else _text(shared, "shared")
    if chosen is None:
        return CbEvent(shared, feats)
    if isinstance(chosen, bool) or not isinstance(chosen, (int, np.integer)) or not 0 <= chosen < len(feats):
        raise DataError(f"chosen: the logged action's position, 0..{len(feats) - 1} (got {chosen!r})")
    for name, value in (("cost", cost), ("probability", probability), ("weight", weight)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not math.isfinite(value):
            raise DataError(f"{name}: expected a finite number (got {value!r})")
    if not 0.0 < probability <= 1.0:
        raise DataError(f"probability: the logged action's probability, in (0, 1] (got {probability!r})")
    if weight < 0:
        raise DataError(f"weight: must be >= 0 (got {weight!r})")
    return CbEvent(shared, feats, int(chosen), float(cost), float(probability), float(weight))


_POW10 = [float(f"1e{k}") for k in range(309)]
_AS_PARSED = {}   # as_parsed's answers, up to _AS_PARSED_SIZE of them (a served model's costs and weights repeat)
_AS_PARSED_SIZE = 4096


def as_parsed(x: float) -> float:
    """``_as_parsed(x)``, remembered for up to ``_AS_PARSED_SIZE`` values of ``x``; 0 and -0 (equal keys
    of a table) are their own answers."""
    x = float(x)
    if x == 0.0:
        return x
    value = _AS_PARSED.get(x)
    if value is None:
        value = _as_parsed(x)
        if len(_AS_PARSED) < _AS_PARSED_SIZE:
            _AS_PARSED[x] = value
    return value


def _as_parsed(x: float) -> float:
    """The number olcli's parser (engine/numbers.py ``parse_number``) reads from ``repr(x)`` (x finite):
    the mantissa's digits as an integer m and the decimal exponent e, then m · 10^e or m / 10^−e when
    m <= 2^53 and |e| <= 22 (exact powers), else ``_scale``'s one or two roundings. Equal to ``x`` on
    that fast path; a 17-digit repr beyond it can differ by an ulp, as the text path's would."""
    text = repr(float(x))
    negative = text[0] == "-"
    digits, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = digits.partition(".")
    mantissa = int(whole + fraction)
    e = (int(exponent) if exponent else 0) - len(fraction)
    if mantissa == 0:
        value = 0.0
    elif mantissa <= 1 << 53 and -22 <= e <= 22:
        value = float(mantissa) * _POW10[e] if e >= 0 else float(mantissa) / _POW10[-e]
    elif e > 308:
        value = math.inf
    elif e >= 0:
        value = float(mantissa) * _POW10[e]
    elif e >= -308:
        value = float(mantissa) / _POW10[-e]
    elif e < -308 - 308 - 20:
        value = 0.0
    else:
        value = float(mantissa) / 1e308 / _POW10[-e - 308]
    return -value if negative else value


def sample(ranking, u) -> int:
    """VW's ``sample_after_normalizing``: with ``u`` in [0, 1), the first entry of the ranking (action,
    probability pairs) whose running sum of probabilities exceeds u · Σp; the action of that entry."""
    total = 0.0
    for _, p in ranking:
        total += p
    draw, running = u * total, 0.0
    for action, p in ranking:
        running += p
        if running > draw:
            return action
    return ranking[-1][0]


class CbLearner:
    """A contextual-bandit learner: VW's ``--cb_explore_adf``/``--cb_adf`` over a base ``Learner`` (see
    the module's docstring). ``learner``: the base learner; ``settings``: ``settings_of(cb)``; ``state``:
    the reduction's state from a model file (None: new)."""

    def __init__(self, learner, settings, state=None):
        self.learner = learner
        self.settings = dict(settings)
        self.policy = policy_of(learner, self.settings)
        if state is not None:
            self.policy.restore(state)

    @classmethod
    def from_learner(cls, learner) -> "CbLearner":
        """The CB learner of a loaded model (its ``cb`` field: settings and state)."""
        stored = learner.model.cb
        if stored is None:
            raise UsageError("not a contextual-bandit model (olcli vw --cb_explore_adf/--cb_adf -f, olcli train "
                             "--cb-explore-adf -f or Learner(cb=...).save write one)")
        return cls(learner, stored["settings"], stored["state"])

    @property
    def explore(self) -> bool:
        return self.settings["reduction"] == "cb_explore_adf"

    @property
    def model(self):
        return self.learner.model

    # --- predicting ---

    def ranking(self, shared, actions) -> list:
        """VW's prediction for the event: ``cb_explore_adf``: (action, probability) pairs, most likely first
        (``-p``'s order); ``cb_adf``: (action, estimated cost) pairs, best first. Nothing is learned."""
        return self.ranking_of(make_event(shared, actions))

    def ranking_of(self, event: CbEvent) -> list:
        policy = self.policy
        if self.explore and policy.rule == "bag":
            return policy.bag_pmf(event)
        return self.ranking_from_scores(policy.scores(event)[0])

    def ranking_from_scores(self, scores) -> list:
        """``ranking_of`` from the event's scores (``policy.scores``; not for the bag rule, whose
        members score the event each)."""
        if not self.explore:
            return [(a, float(scores[a])) for a in sorted(range(len(scores)), key=lambda a: (scores[a], a))]
        return self.policy.pmf(scores)

    def pmf_of(self, event: CbEvent, ranking=None) -> np.ndarray:
        ranking = self.ranking_of(event) if ranking is None else ranking
        out = np.zeros(len(event.actions))
        if self.explore:
            for a, p in ranking:
                out[a] = p
        else:
            out[ranking[0][0]] = 1.0
        return out

    def predict(self, shared, actions) -> np.ndarray:
        """The PMF over ``actions`` (in their order): the exploration rule's probabilities; with
        ``cb_adf``, 1 on the best-ranked action. Nothing is learned."""
        return self.pmf_of(make_event(shared, actions))

    def scores(self, shared, actions) -> np.ndarray:
        """The estimated cost of every action (the linear scores the ranking sorts, unclipped)."""
        scores, _ = self.policy.scores(make_event(shared, actions))
        return np.asarray(scores, dtype=np.float64)

    # --- learning ---

    def learn(self, shared, actions, chosen, cost, probability, weight=1.0) -> np.ndarray:
        """Learn one logged event: the action at position ``chosen`` was played with ``probability`` and
        cost ``cost``. Returns the PMF the model gave before learning it (as ``predict``), as VW's
        progressive runs do; VW's progress loss goes into ``average_loss``."""
        event = make_event(shared, actions, chosen, cost, probability, weight)
        ranking, _ = self.policy.step(event)
        return self.pmf_of(event, ranking)

    def learn_event(self, event: CbEvent) -> None:
        """Learn a checked, labelled event without predicting it first (olcli serve's reward: the PMF was
        computed when the event was ranked). The model changes exactly as in ``learn``."""
        self.policy.learn(event)

    @property
    def learns_one_line(self) -> bool:
        """Whether an event is learned as its chosen action's line alone (cb_type mtr, one weight copy):
        then ``learn_parsed`` can learn it from that line as parsed when the event was scored."""
        policy = self.policy
        return policy.cb_type == "mtr" and policy.members == 1 and policy.placed is None

    def learn_parsed(self, actions: int, chosen: int, cost: float, probability: float, index, value, count,
                     process=None, learn_line=None) -> None:
        """``learn_event`` of an event of ``actions`` actions (weight 1) whose chosen action's line (its
        features with the shared ones, ``policy.action_lines``) was parsed already: ``index`` (hashed,
        int32), ``value`` and VW's feature ``count`` of that line (engine/cb_single.py keeps them when it
        scores the event). Only with ``learns_one_line``. The model changes exactly as ``learn_event``'s:
        mtr's running totals, then the line learned with label ``cost`` and importance weight
        (1 / p) · (events / actions) (p = 1 for squarecb unless the chosen action is the last, as
        ``CbExploreAdf._learn_member``), each number as the parser reads the text ``learn_event`` writes
        for it (``as_parsed``), then the rule's counters (``CbExploreAdf.learn``). ``process``: what runs
        the batch (``Learner.process``'s arguments and result; default the base learner's), e.g. olcli
        serve's ``OneLineLearning``. ``learn_line``: tried first, ``learn_line(label, weight, index, value,
        count)`` learns the line as ``process`` would and returns whether the prediction diverged, or None
        when it learned nothing (then ``process`` runs): olcli serve's ``EventScorer.learn``
        (engine/cb_single.py)."""
        policy = self.policy
        if policy.rule == "squarecb" and chosen != actions - 1:
            probability = 1.0
        policy.event_sum[0] += 1
        policy.action_sum[0] += actions
        weight = 1.0 / probability * (policy.event_sum[0] / policy.action_sum[0])
        learner = self.learner
        label, weight = as_parsed(cost), as_parsed(weight)
        diverged = None if learn_line is None else learn_line(label, weight, index, value, count)
        if diverged is None:
            from olcli.engine.records import Batch

            batch = Batch(np.array([label]), np.array([weight]), np.zeros(1), np.array([0, len(index)], np.int64),
                          index, value, np.array([count], np.int64))
            diverged = (process or learner.process)(batch, True).diverged_at >= 0
        if diverged:
            from olcli.errors import Diverged

            raise Diverged("the model diverged: a prediction is not a finite number; " + learner.divergence_advice())
        policy.events_learned += 1
        if policy.rule == "first" and policy.tau > 0:
            policy.tau -= 1

    @property
    def average_loss(self):
        """VW's ``average loss`` of the events learned here (the IPS estimate of the policy's cost for
        ``cb_explore_adf``; of the greedy action's for ``cb_adf``); None before any."""
        return self.policy.average_loss

    @property
    def examples(self) -> int:
        return self.policy.examples

    # --- the model file ---

    def store_state(self) -> None:
        """Put the reduction's settings and state in the model (its ``cb`` field), as ``olcli vw -f``."""
        self.learner.model.cb = {"settings": dict(self.settings), "state": self.policy.state()}

    def save(self, path) -> None:
        """The model file ``olcli vw --cb_explore_adf -f``/``olcli train --cb-explore-adf -f`` write."""
        self.store_state()
        self.learner.save(path)

    def to_bytes(self) -> bytes:
        self.store_state()
        return self.learner.to_bytes()

    def __reduce__(self):
        return _restore, (type(self.learner), self.to_bytes())

    def __repr__(self) -> str:
        s = self.settings
        what = f"{s['reduction']}, {s['rule']}, {s['cb_type']}" if self.explore else f"{s['reduction']}, {s['cb_type']}"
        return f"CbLearner({what}, base={self.learner!r})"


def _restore(learner_class, raw) -> CbLearner:
    return CbLearner.from_learner(learner_class.from_bytes(raw))
