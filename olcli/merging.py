"""Learners that each learned a shard, merged into one (``Learner.merge``): the settings
they must share checked (settings.MERGE_EQUAL), then each algorithm's merge rule on the
rows some learner touched."""

import numpy as np

from olcli import model as model_file
from olcli.engine.records import ADDITIVE_COUNTERS, C_MAX_LABEL, C_MIN_LABEL, C_ROUNDS, C_WEIGHT
from olcli.errors import UsageError
from olcli.settings import merge_difference


def merge(learner_class, learners, base=None):
    """Combine learners that each learned a separate shard starting from ``base``
    (the common starting learner; None = a fresh one) with the algorithm's merge
    rule (each algorithm module's ``merge``; docs, "Python API"). Counters add the
    shards' increments over the base. An algorithm with global scalars (registry
    ``scalars``: --gd, --coin) gets them too: its ``merge`` takes
    ``base_scalars``/``shard_scalars`` (it may need them for the weights) and
    its module-level ``merge_scalars`` gives the merged learner's. One learner:
    an exact copy of it."""
    learners = list(learners)
    if not learners:
        raise UsageError("merge needs at least one learner")
    for k, other in enumerate(learners + ([base] if base is not None else [])):
        if not isinstance(other, learner_class):
            what = "base" if k == len(learners) else f"learners[{k}]"
            raise UsageError(f"merge takes olcli Learner objects: {what} is a {type(other).__name__} ({other!r:.40})")
    first = learners[0].model
    for other in learners[1:] + ([base] if base is not None else []):
        check_compatible(first, other.model)
    if len(learners) == 1:
        return learners[0].copy()
    # Every merge rule works row by row and keeps a row that is zero in the base and
    # in every shard at zero: the rules run on the rows some learner touched only.
    touched = [lr.model.pool.nonzero()[0] for lr in learners]
    if base is None:
        base_counters = np.zeros_like(first.counters)
    else:
        base_counters = base.model.counters
        touched.append(base.model.pool.nonzero()[0])
    rows = np.unique(np.concatenate(touched))
    base_state = (np.zeros((len(rows), first.pool.slots)) if base is None
                  else base.model.pool.gather(rows))
    kernels, spec, params = learners[0]._kernels, learners[0]._spec, learners[0]._params
    shard_weights = [float(lr.model.counters[C_WEIGHT] - base_counters[C_WEIGHT]) for lr in learners]
    arguments = (base_state, [lr.model.pool.gather(rows) for lr in learners], params, float(base_counters[C_ROUNDS]),
                 [float(lr.model.counters[C_ROUNDS]) for lr in learners], shard_weights)
    scalars = first.scalars
    if spec.scalars:
        base_scalars = (np.array(spec.initial_scalars(first.params), dtype=np.float64) if base is None
                        else base.model.scalars)
        shard_scalars = [lr.model.scalars for lr in learners]
        state = kernels.merge(*arguments, base_scalars=base_scalars, shard_scalars=shard_scalars)
        scalars = kernels.merge_scalars(base_scalars, shard_scalars, *arguments[2:])
    else:
        state = kernels.merge(*arguments)
    counters = base_counters.copy()
    additive = list(ADDITIVE_COUNTERS)
    counters[additive] += sum(lr.model.counters[additive] - base_counters[additive] for lr in learners)
    counters[C_MIN_LABEL] = min(lr.model.counters[C_MIN_LABEL] for lr in learners)
    counters[C_MAX_LABEL] = max(lr.model.counters[C_MAX_LABEL] for lr in learners)
    merged = learners[0].copy()
    merged.model.pool = model_file.RowPool.from_rows(first.pool.block_rows, first.pool.group, first.pool.slots,
                                                     rows, state, split=first.pool.split)
    merged.model.counters = counters
    merged.model.scalars = np.array(scalars, dtype=np.float64, copy=True)
    merged.reset_summary()
    return merged


def check_compatible(a: model_file.Model, b: model_file.Model) -> None:
    """The settings whose merge rule is "equal" (settings.MERGE_EQUAL) must agree; the input
    format too, once both know it."""
    difference = merge_difference(a, b)
    if difference:
        what, left, right = difference
        raise UsageError(f"cannot merge learners with different {what}: {left!r} and {right!r}")
    if a.input_format and b.input_format and a.input_format != b.input_format:
        raise UsageError(f"cannot merge learners of {a.input_format} and {b.input_format} input")
