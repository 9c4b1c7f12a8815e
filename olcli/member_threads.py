"""The default's members learn on two threads (``--mix`` with ``--oaa``/``--softmax``; issue
29's decision 5).

A multiclass default mixing two or three gd members keeps each member's rows of a feature
apart in the pool (row_pool.RowPool's split, olcli/model.py ``pool_split``), so two threads can
write them at once without sharing cache lines. A chunk of examples is then learned in three
kernel calls: ``mixture.learn_part(0)`` on a worker thread and ``learn_part(1)`` on the
calling one at the same time (``mixture.part_members``: the first member and the second, or
the first two and the third), each keeping its members' class scores; then
``finish_chunk_multiclass``, the mixture's weights, class scores and report over the chunk
in order. The kernels release the GIL. The numbers are the ones the one-thread loop gives
(engine/mixture.py's comment above ``part_members``; tests/test_member_threads.py).

Used when learning a chunk of at least ``MIN_EXAMPLES`` examples on a machine with two
cores or more, unless the run asked for one thread (``--threads 1``: ``Learner.use_threads``).
A smaller chunk (``olcli serve``'s calls of a few lines) is learned by the one-thread loop,
where handing it to a thread would cost more than it saves. Measured on this 2-core machine:
benchmarks/results/member_threads_s45.md.
"""

import os
import threading

import numpy as np

MIN_EXAMPLES = 64

_lock = threading.Lock()
_worker = None   # one per process, shared by every learner (its jobs are independent)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def _the_worker():
    global _worker
    with _lock:
        if _worker is None:
            from olcli.pipeline import Workers

            _worker = Workers(1, name="olcli-members")
        return _worker


def split_of(settings) -> int:
    """engine/mixture.py ``split_of`` for a mixture's Settings, in Python."""
    from olcli.engine.mixture import N_GD, P_MEMBERS

    members = int(settings.params[P_MEMBERS])
    return members if settings.classes > 0 and 2 <= members <= N_GD else 1


class MemberThreads:
    """``run_chunk_multiclass`` of the mixture's kernel module on two threads where that
    applies (module docstring), else the module's own; its other kernels as they are."""

    def __init__(self, kernels):
        self.kernels = kernels
        self.enabled = cores() > 1

    def run_chunk_multiclass(self, table, settings, batch, tally, predictions, scores):
        split = split_of(settings)
        if not (self.enabled and settings.learn and split > 1 and len(batch.labels) >= MIN_EXAMPLES):
            return self.kernels.run_chunk_multiclass(table, settings, batch, tally, predictions, scores)
        out = np.empty((split, len(batch.labels) * settings.classes))
        other = _the_worker().submit(self.kernels.learn_part, table, settings, batch, tally, 0, out)
        try:
            stop = int(self.kernels.learn_part(table, settings, batch, tally, 1, out))
        finally:
            stop_other = int(other.result())
        return self.kernels.finish_chunk_multiclass(table, settings, batch, tally, predictions, scores, out,
                                                    min(stop, stop_other))

    def __getattr__(self, name):   # the module's other kernels (run_chunk, weights_at, ...)
        return getattr(self.kernels, name)


def chunks(kernels):
    """What a learner calls for a chunk: ``MemberThreads`` for a kernel module with parts, else the module."""
    return MemberThreads(kernels) if hasattr(kernels, "learn_part") else kernels
