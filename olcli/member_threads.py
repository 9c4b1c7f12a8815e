"""The default's members learn on two threads (``--mix`` with ``--oaa``/``--softmax``; issue
29's decision 5).

A multiclass default mixing two or three gd members keeps each member's rows in a region of
the pool of their own (row_pool.RowPool's split, olcli/model.py ``pool_split``), so two threads
can write them at once without sharing cache lines. A chunk of examples is then learned in three
kernel calls: ``mixture.learn_part(0)`` and ``learn_part(1)`` on two worker threads at the
same time (``mixture.part_members``: the first member and the second, or
the first two and the third), each keeping its members' class scores; then
``finish_chunk_multiclass``, the mixture's weights, class scores and report over the chunk
in order. The kernels release the GIL. The numbers are the ones the one-thread loop gives
(engine/mixture.py's comment above ``part_members``; tests/test_member_threads.py), up to a
divergence: the predictions, report and counters stop at the same example, but a part whose
members stayed finite has learned past it (a diverged model is neither saved nor served).
A forked child starts workers of its own; an interrupt waits for the chunk's three calls.
Scale-out shards (olcli/shard_tasks.py) learn on one thread: each core runs a worker process.

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
_workers = None   # two per process, shared by every learner (their jobs are independent)


def _forget_workers() -> None:
    """In a forked child: the parent's threads are not there (the next chunk starts its own)."""
    global _workers, _lock
    _workers, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def _the_workers():
    global _workers
    with _lock:
        if _workers is None:
            from olcli.workers import Workers

            _workers = Workers(2, name="olcli-members")
        return _workers


def split_of(settings) -> int:
    """The pool's split for a mixture's Settings (olcli/model.py ``mix_split``)."""
    from olcli.engine.mixture import P_MEMBERS
    from olcli.model import mix_split

    return mix_split(float(settings.params[P_MEMBERS]), settings.classes)


def _wait_for(jobs) -> tuple:
    """Every job's result (None for a job that raised), waiting for all of them whatever
    arrives meanwhile, and the first exception: a job's own, or one raised in this thread
    while it waited (a KeyboardInterrupt: the parts are still writing the table)."""
    results, error = [], None
    for job in jobs:
        while True:
            try:
                results.append(job.result())
                break
            except BaseException as exc:
                error = error or exc
                if job.done() and job.error() is exc:   # the job's own exception (else one raised here: wait on)
                    results.append(None)
                    break
    return results, error


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
        from olcli import signals

        out = np.empty((split, len(batch.labels) * settings.classes))
        # The three calls are one step: the parts on the two workers (this thread only waits,
        # so an interrupt here never loses a part's result), then the mixture's bookkeeping,
        # and only then an interrupt that arrived meanwhile (olcli's handlers raise none inside
        # ``critical``; Python's KeyboardInterrupt is held by _wait_for): the table, counters,
        # scalars and tally always hold whole chunks.
        with signals.critical():
            workers, jobs = _the_workers(), []
            try:
                for part in (0, 1):
                    jobs.append(workers.submit(self.kernels.learn_part, table, settings, batch, tally, part, out))
            finally:
                while len(jobs) < 2:   # an interrupt between the two: the other part runs too
                    jobs.append(workers.submit(self.kernels.learn_part, table, settings, batch, tally, len(jobs),
                                               out))
            stops, error = _wait_for(jobs)
            if any(stop is None for stop in stops):
                raise error   # a part failed (not an interrupt): the chunk cannot be finished
            rows = self.kernels.finish_chunk_multiclass(table, settings, batch, tally, predictions, scores, out,
                                                        min(int(stop) for stop in stops))
        if error is not None:
            raise error
        return rows

    def __getattr__(self, name):   # the module's other kernels (run_chunk, weights_at, ...)
        return getattr(self.kernels, name)


def chunks(kernels):
    """What a learner calls for a chunk: ``MemberThreads`` for a kernel module with parts, else the module."""
    return MemberThreads(kernels) if hasattr(kernels, "learn_part") else kernels
