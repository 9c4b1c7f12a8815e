"""The records that travel into and out of the learning kernels, with named slots.

Plain Python (no numba), so that the report, the model file and ``olcli --help``
can read the slot names without compiling anything. The kernels take four
records instead of a long list of arrays (few, named arguments):

- ``Table``: what the learner is — its per-coordinate state and its lifetime
  counters (``C_*``), saved in the model file;
- ``Settings``: how to run — hyper-parameters, loss, learning or not, classes;
- ``Batch``: the examples, as sparse rows (``row_ptr`` into ``index``/``value``);
- ``Tally``: what the run measured — progressive statistics (``S_*``), the AUC
  histogram, VW's progress rows (``R_*``) and this pass's holdout sums (``H_*``).

Numba types a NamedTuple of arrays and scalars once per combination of field
types, so these records keep the compiled kernels' cache entries stable.
"""

from typing import NamedTuple

import numpy as np

# The model's lifetime counters (saved in its header), updated example by example
# so that a run continued with -i adds up exactly as one long run does. The last
# two are the range of labels learned from so far (VW's min_label/max_label):
# predictions are clipped to it (driver.clip_prediction).
COUNTER_NAMES = ("rounds", "examples", "labeled_examples", "weighted_examples",
                 "weighted_labels", "loss_sum", "total_features", "min_label", "max_label")
(C_ROUNDS, C_EXAMPLES, C_LABELED, C_WEIGHT, C_LABEL_SUM, C_LOSS, C_FEATURES,
 C_MIN_LABEL, C_MAX_LABEL) = range(len(COUNTER_NAMES))
N_COUNTERS = len(COUNTER_NAMES)
ADDITIVE_COUNTERS = tuple(range(C_MIN_LABEL))   # the others are a running min and max

# Run statistics (Tally.stats).
S_EXAMPLES = 0        # examples seen, labeled or not
S_WEIGHT = 1          # importance-weighted count of labeled examples
S_UNLABELED_WEIGHT = 2
S_LOSS = 3            # importance-weighted progressive loss sum
S_LABEL_SUM = 4       # importance-weighted label sum
S_LABEL_SQUARES = 5   # importance-weighted squared-label sum (best constant, squared loss)
S_POSITIVE = 6        # importance weight of label +1
S_NEGATIVE = 7        # importance weight of label -1
S_OTHER_LABELS = 8    # labeled examples whose label is not -1/+1
S_CORRECT = 9         # importance weight of sign(prediction) == label (multiclass: of the right class)
S_FEATURES = 10       # total feature number
S_NEXT_DUMP = 11      # example weight at which the next progress row is due
S_SINCE_LOSS = 12
S_SINCE_WEIGHT = 13
S_LABELED = 14        # labeled examples
S_LOG_LOSS = 15       # multiclass: importance-weighted log loss of the class probabilities
S_DIVERGED = 16       # 1 + the batch position of the example whose prediction was NaN/inf; 0 = fine
S_DUMP_FACTOR = 17    # VW's -P: after a row the next is due at weight x this (VW's default 2.0) ...
S_DUMP_STEP = 18      # ... or, when this is > 0 (-P N, an integer), at weight + N
N_STATS = 19

# Progress row columns (Tally.progress): VW's table.
R_AVERAGE_LOSS, R_SINCE_LAST, R_COUNTER, R_WEIGHT, R_LABEL, R_PREDICTION, R_FEATURES = range(7)
N_PROGRESS_COLUMNS = 7
MAX_PROGRESS_ROWS = 128

AUC_BINS = 1 << 16

# Holdout sums of one pass (Tally.holdout).
H_PERIOD = 0        # every H_PERIOD-th example of the data is held out; 0 = no holdout;
                    # -N: every example after the first N of the pass (VW's --holdout_after N)
H_SEEN = 1          # examples of this pass processed so far
H_ROWS = 2          # 1: progress rows report the holdout loss (passes after the first)
H_LOSS = 3          # importance-weighted loss of held-out examples in this pass
H_WEIGHT = 4
H_SINCE_LOSS = 5
H_SINCE_WEIGHT = 6
N_HOLDOUT = 7


class Table(NamedTuple):
    state: np.ndarray      # (rows, slots) float64; the algorithm's named slots
    counters: np.ndarray   # float64[N_COUNTERS]
    scalars: np.ndarray    # float64: the algorithm's own global numbers (registry Algorithm.scalars)


class Settings(NamedTuple):
    params: np.ndarray     # float64, in the algorithm's PARAMS order
    loss: int              # engine.losses code
    tau: float             # quantile level
    clip: bool             # clip dloss/dp to [-1, 1] (ScInOL with an unbounded loss)
    learn: bool
    block_rows: int        # rows of one class's block (the whole table when not multiclass)
    classes: int           # K, or 0
    softmax: bool          # multiclass: softmax (else one against all)
    min_prediction: float  # --min-prediction / --max-prediction: a fixed end of the clipping range;
    max_prediction: float  # NaN = that end is the label range seen (VW's rule)


class Batch(NamedTuple):
    labels: np.ndarray         # float64[n]; NaN = unlabeled
    importance: np.ndarray     # float64[n]
    base: np.ndarray           # float64[n], added to the prediction
    row_ptr: np.ndarray        # int64[n + 1], example e is index/value[row_ptr[e]:row_ptr[e + 1]]
    index: np.ndarray          # int32 rows of the table
    value: np.ndarray          # float64
    feature_count: np.ndarray  # int64[n], features as VW counts them


class Tally(NamedTuple):
    stats: np.ndarray      # float64[N_STATS]
    auc: np.ndarray        # float64[2, AUC_BINS]: positives, negatives by sigmoid(prediction)
    progress: np.ndarray   # float64[MAX_PROGRESS_ROWS, N_PROGRESS_COLUMNS], rows of one kernel call
    holdout: np.ndarray    # float64[N_HOLDOUT]


def new_tally(holdout_period: int = 0, holdout_rows: bool = False) -> Tally:
    stats = np.zeros(N_STATS)
    stats[S_NEXT_DUMP] = 1.0
    stats[S_DUMP_FACTOR] = 2.0
    return Tally(stats, np.zeros((2, AUC_BINS)), np.zeros((MAX_PROGRESS_ROWS, N_PROGRESS_COLUMNS)),
                 new_holdout(holdout_period, holdout_rows))


def new_holdout(period: int = 0, report_rows: bool = False) -> np.ndarray:
    holdout = np.zeros(N_HOLDOUT)
    holdout[H_PERIOD] = period
    holdout[H_ROWS] = 1.0 if report_rows else 0.0
    return holdout
