"""One kernel call on a batch and what it gives back (``Processed``); multiclass labels
mapped into the kernels' classes 1..K and back, as VW's --oaa reads them (oaa.cc)."""

import numpy as np

from olcli.engine.records import H_SEEN, S_DIVERGED, Batch
from olcli.records import Record
from olcli.settings import INDEXING_UNDECIDED


class Processed(Record):
    """What one kernel call gave back."""
    _fields = ("predictions", "scores", "progress_rows", "diverged_at", "label_base")

    def __init__(
            self,
            predictions: np.ndarray,     # per example: the prediction (multiclass: the class 1..K)
            scores: np.ndarray | None,   # multiclass: (n, K) class scores
            progress_rows: int,          # rows of VW's table written to tally.progress
            diverged_at: int,            # batch position of the first non-finite prediction, or -1
            label_base: np.ndarray | None = None,  # multiclass: per example, the label of the first class (0 or 1)
    ):
        self.predictions, self.scores, self.progress_rows, self.diverged_at, self.label_base = (
            predictions, scores, progress_rows, diverged_at, label_base)


def process_multiclass(learner, batch, learn, tally, table, settings) -> Processed:
    """Multiclass labels as VW's --oaa reads them (oaa.cc): labels 1..K, or 0..K-1 once
    a 0 is learned from (0-indexed), or 1..K for good once K is; before either (or with
    --indexing) the model's indexing holds. The kernels know classes 1..K: labels are
    mapped in, predictions out; a batch where the indexing is decided runs as two calls."""
    m = learner.model
    k = m.classes
    labels = batch.labels
    switch = -1
    if learn and m.indexing == INDEXING_UNDECIDED:
        deciding = np.flatnonzero((labels == 0.0) | (labels == k))
        switch = int(deciding[0]) if deciding.size else -1
    if switch < 0:
        return _multiclass_call(learner, batch, 0, len(labels), learn, tally, table, settings, m.indexing)
    first = None
    if switch > 0:
        first = _multiclass_call(learner, batch, 0, switch, learn, tally, table, settings, m.indexing)
        if first.diverged_at >= 0:
            return first
        saved = tally.progress[:first.progress_rows].copy()
    m.indexing = 0 if labels[switch] == 0.0 else 1
    rest = _multiclass_call(learner, batch, switch, len(labels), learn, tally, table, settings, m.indexing)
    if first is None:
        return rest
    rows = first.progress_rows + rest.progress_rows
    tally.progress[first.progress_rows:rows] = tally.progress[:rest.progress_rows].copy()
    tally.progress[:first.progress_rows] = saved
    return Processed(np.concatenate([first.predictions, rest.predictions]),
                     np.concatenate([first.scores, rest.scores]), rows,
                     rest.diverged_at + switch if rest.diverged_at >= 0 else -1,
                     np.concatenate([first.label_base, rest.label_base]))

def _multiclass_call(learner, batch, a, b, learn, tally, table, settings, indexing) -> Processed:
    k = learner.model.classes
    labels = batch.labels[a:b]
    # Into the kernels' classes 1..K; 0 there is "no class" (every class a negative, a 0/1
    # loss of 1), which VW's oaa.cc gives a label outside the range (it warns).
    if indexing == 0:    # 0..K-1 -> classes 1..K
        inside = np.where(labels >= k, 0.0, labels + 1.0)
    else:                # 1..K; a 0 (indexing 1, or before any is learned) is outside
        inside = labels
    part = Batch(np.ascontiguousarray(inside), batch.importance[a:b], batch.base[a:b],
                 batch.row_ptr[a:b + 1], batch.index, batch.value, batch.feature_count[a:b])
    n = b - a
    predictions = np.empty(n)
    scores = np.empty((n, k))
    seen = tally.holdout[H_SEEN]
    rows = int(learner._chunks.run_chunk_multiclass(table, settings, part, tally, predictions, scores))
    outside = np.flatnonzero((inside == 0.0) & ~np.isnan(labels))
    if outside.size:
        _vw_log_loss_outside(tally, part, labels, scores, outside, seen, indexing, k,
                             learner.model.multiclass == "softmax")
    diverged_at = int(tally.stats[S_DIVERGED]) - 1
    tally.stats[S_DIVERGED] = 0.0
    base = 0 if indexing == 0 else 1
    if base == 0:  # classes 1..K are the labels 0..K-1
        predictions -= 1.0
        from olcli.engine.records import R_LABEL, R_PREDICTION

        tally.progress[:rows, R_LABEL] -= 1.0
        tally.progress[:rows, R_PREDICTION] -= 1.0
    return Processed(predictions, scores, rows, diverged_at, np.full(n, base, np.int64))


def _vw_log_loss_outside(tally, part, labels, scores, outside, seen, indexing, k, softmax) -> None:
    """The multiclass log loss of an example whose label is outside the classes, as VW's
    oaa.cc takes it: the probability of class ((label if 0-indexed else label - 1) mod 2^32)
    mod K (the kernels, knowing no class, took class K's). Held-out examples are not in it."""
    from olcli.engine.multiclass import log_probabilities
    from olcli.engine.records import H_PERIOD, S_LOG_LOSS

    period = tally.holdout[H_PERIOD]
    log_probs = np.empty(k)
    for e in outside:
        if period > 0 and (seen + e + 1) % period == 0:
            continue
        label = int(labels[e])
        index = ((label if indexing == 0 else label - 1) & 0xFFFFFFFF) % k
        log_probabilities(scores[e], softmax, log_probs)
        tally.stats[S_LOG_LOSS] += part.importance[e] * (log_probs[k - 1] - log_probs[index])
