"""VW's ``--cb K --eval``: off-policy evaluation of logged contextual-bandit data (``olcli/cb_sim.py``'s
module docstring gives the estimators: DR with one linear cost model, or IPS)."""

import numpy as np

from olcli import cb
from olcli.cb_format import CbEvent, clip, located, parse_cb_label, split_line
from olcli.errors import DataError


def int_in(token, k, what, text, source, line):
    """``token`` as a whole number 1..k, or a DataError naming file, line, ``what`` and the line."""
    try:
        value = int(token)
    except ValueError:
        raise DataError(f"{located(source, line)}: {what} {token!r} is not a whole number 1..{k}: "
                        f"{clip(text)!r}") from None
    if not 1 <= value <= k:
        raise DataError(f"{located(source, line)}: {what} {value} is outside 1..{k}: {clip(text)!r}")
    return value


def parse_eval_line(text, k, source="<input>", line=1):
    """``--eval``'s label ``π a:c:p [...]`` (VW's parse_label_cb_eval: the evaluated policy's action, then a
    CB label) -> (π 1..K, the logged CbEvent of ``--cb K``)."""
    words, tag, features = split_line(text)
    if len(words) < 2:
        raise DataError(f"{located(source, line)}: an --eval label is 'policy_action action:cost:probability' "
                        f"(two words at least): {clip(text)!r}")
    pi = int_in(words[0], k, "the evaluated policy's action", text, source, line)
    labels = [parse_cb_label(w, source, line) for w in words[1:]]
    actions = [int_in(lab.action, k, "CB action", text, source, line) for lab in labels]
    observed = next((i for i, lab in enumerate(labels) if lab.observed), None)
    allowed = tuple(actions) if len(labels) > 1 else None
    if observed is None:
        raise DataError(f"{located(source, line)}: an --eval example needs a logged cost with probability > 0 "
                        f"(VW: 'can not use a test label for evaluation'): {clip(text)!r}")
    lab = labels[observed]
    return pi, CbEvent(None, (features,), actions[observed] - 1, lab.cost, lab.probability, tag=tag, line=line,
                       allowed=allowed)


class Evaluate:
    """VW's ``--cb K --eval`` (see the module's docstring): ``step(pi, event)`` -> the example's loss, the
    DR (``cb_type="dr"``) or IPS estimate of the evaluated action's cost."""

    def __init__(self, learner, k, cb_type="dr"):
        self.learner, self.k, self.cb_type = learner, int(k), cb_type
        self.examples = 0
        self.labelled_weight = 0.0
        self.sum_loss = 0.0
        self.sum_loss2 = 0.0
        self.total_features = 0
        self.current_features = 0

    def state(self) -> dict:
        return {}

    def _batch(self, features, action, label=None, weight=1.0):
        """Action ``action`` (1-based)'s cost-model copy of the line: every index + K + action − 1 (the
        learner's constant row at VW's constant index first)."""
        head = "" if label is None else f"{label!r} {weight!r} "
        batch, _ = self.learner.to_batch([head + (features or "|")])
        bits = self.learner.model.bits
        table = (1 << bits) - 1
        used = int(batch.row_ptr[-1])
        index = batch.index[:used].astype(np.int64)
        index = np.where(index == (1 << bits), cb.CONSTANT_HASH & table, index)
        batch.index[:used] = ((index + self.k + action - 1) & table).astype(batch.index.dtype)
        return batch, int(batch.feature_count.sum())

    def step(self, pi, event, learn=True):
        from olcli.engine.records import new_tally

        features = event.actions[0]
        a_star, c, p = event.chosen + 1, float(event.cost), float(event.probability)
        counted = 0
        if self.cb_type == "ips":
            loss = c / p if pi == a_star else 0.0
            _, counted = self._batch(features, 1)
        else:
            g = {}
            for i in (event.allowed or range(1, self.k + 1)):
                if i == a_star and learn:
                    batch, counted = self._batch(features, i, c, event.weight / p)
                    done = self.learner.process(batch, True)
                else:
                    batch, counted = self._batch(features, i)
                    done = self.learner.process(batch, False, new_tally())
                g[i] = float(done.predictions[0])
            base = g.get(pi)
            if base is None:   # π outside the allowed actions: VW falls back to IPS
                loss = c / p if pi == a_star else 0.0
            else:
                loss = base + ((c - base) / p if pi == a_star else 0.0)
        self.examples += 1
        self.labelled_weight += 1.0
        self.sum_loss += loss
        self.sum_loss2 += loss * loss
        self.current_features = counted
        self.total_features += counted
        return loss
