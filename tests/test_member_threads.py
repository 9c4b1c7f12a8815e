"""The multiclass default's members on two threads (olcli/member_threads.py): every number is
the one the one-thread loop gives, and the threads are used where they apply."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from olcli import member_threads
from olcli.engine.records import Batch
from olcli.learner import Learner

pytestmark = pytest.mark.skipif(member_threads.cores() < 2, reason="the members' threads need two cores")

HERE = os.path.dirname(os.path.abspath(__file__))
LETTER = os.path.join(HERE, "..", "sample_data", "letter_train.vw")


def _stream(seed, n, classes, huge_from=None):
    """A seeded multiclass batch over 2^8 rows: 6 features each, labels 1..classes from a hidden
    linear model, importance 0.5..2 with some examples unlabeled (NaN) and some of weight 0;
    from example ``huge_from`` on, feature values of 1e300."""
    rng = np.random.default_rng(seed)
    index = rng.integers(0, 256, size=(n, 6)).astype(np.int32)
    value = rng.normal(size=(n, 6)) * rng.choice([0.5, 1.0, 2.0], size=(n, 6))
    score = (rng.normal(size=256)[index] * value).sum(axis=1)
    labels = (np.abs(score * 2).astype(int) % classes + 1).astype(float)
    if huge_from is not None:
        value[huge_from:] *= 1e300
    labels[rng.random(n) < 0.05] = np.nan
    importance = rng.choice([0.5, 1.0, 2.0], size=n)
    importance[rng.random(n) < 0.03] = 0.0
    return Batch(labels, importance, np.zeros(n), np.arange(0, 6 * n + 1, 6, dtype=np.int64),
                 index.ravel(), value.ravel(), np.full(n, 6, np.int64))


def _learn(batch, threads, chunk, **options):
    learner = Learner("mix", bits=8, **options)
    learner.use_threads(threads)
    outputs = []
    for lo in range(0, len(batch.labels), chunk):
        hi = min(lo + chunk, len(batch.labels))
        part = Batch(batch.labels[lo:hi], batch.importance[lo:hi], batch.base[lo:hi],
                     batch.row_ptr[lo:hi + 1] - batch.row_ptr[lo], batch.index[batch.row_ptr[lo]:batch.row_ptr[hi]],
                     batch.value[batch.row_ptr[lo]:batch.row_ptr[hi]], batch.feature_count[lo:hi])
        done = learner.process(part, True)
        outputs.append((done.predictions, done.scores, done.diverged_at))
    return learner, outputs


def _same(a, b):
    (la, oa), (lb, ob) = a, b
    for (pa, sa, da), (pb, sb, db) in zip(oa, ob):
        assert np.array_equal(pa, pb, equal_nan=True)
        assert np.array_equal(sa, sb, equal_nan=True)
        assert da == db
    assert np.array_equal(la.model.pool.state, lb.model.pool.state, equal_nan=True)
    assert np.array_equal(la.model.scalars, lb.model.scalars)
    assert np.array_equal(la.model.counters, lb.model.counters)
    for x, y in zip(la.tally, lb.tally):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)


@pytest.mark.parametrize("members", [None, 3])
@pytest.mark.parametrize("loss,mode", [("logistic", "oaa"), ("hinge", "oaa"), ("squared", "oaa"),
                                       (None, "softmax")])
def test_two_threads_give_the_one_thread_numbers(loss, mode, members):
    """Chunks of 300 examples (the threads' path) give the predictions, class scores, state,
    scalars, counters and report sums of the one-thread loop, chunk by chunk."""
    batch = _stream(7, 1500, 5)
    options = dict(loss=loss, members=members, **{mode: 5})
    threaded = _learn(batch, True, 300, **options)
    one = _learn(batch, False, 300, **options)
    assert threaded[0]._chunks.enabled and not one[0]._chunks.enabled
    _same(threaded, one)


def test_the_threads_are_used_for_a_large_chunk_only(monkeypatch):
    """learn_part runs for a chunk of MIN_EXAMPLES examples or more, and not for a smaller one,
    nor for four members (one row a feature: not split), nor for --threads 1."""
    calls = []
    batch = _stream(8, 200, 4)
    for members, threads, chunk, expected in ((None, True, 200, True), (None, True, member_threads.MIN_EXAMPLES - 1,
                                                                        False),
                                              (4, True, 200, False), (None, False, 200, False)):
        learner = Learner("mix", bits=8, oaa=4, members=members)
        learner.use_threads(threads)
        kernels = learner._chunks.kernels if isinstance(learner._chunks, member_threads.MemberThreads) else None
        if kernels is not None:
            real = kernels.learn_part
            monkeypatch.setattr(kernels, "learn_part", lambda *args, real=real: calls.append(1) or real(*args))
        calls.clear()
        part = Batch(batch.labels[:chunk], batch.importance[:chunk], batch.base[:chunk], batch.row_ptr[:chunk + 1],
                     batch.index[:batch.row_ptr[chunk]], batch.value[:batch.row_ptr[chunk]],
                     batch.feature_count[:chunk])
        learner.process(part, True)
        assert bool(calls) == expected, (members, threads, chunk)
        monkeypatch.undo()


def test_a_divergence_is_found_at_the_same_example():
    """Feature values of 1e300 from example 400 at -l 1e30: the members' scores overflow, and the
    threads report the example the one thread stops at, with the same predictions before it."""
    batch = _stream(9, 600, 3, huge_from=400)
    threaded = _learn(batch, True, 600, oaa=3, loss="logistic", eta=1e30)
    one = _learn(batch, False, 600, oaa=3, loss="logistic", eta=1e30)
    (_, [(pa, sa, da)]), (_, [(pb, sb, db)]) = threaded, one
    assert da == db and da >= 0
    assert np.array_equal(pa[:da], pb[:da]) and np.array_equal(sa[:da], sb[:da])


def _cli(tmp_path, name, *args):
    (tmp_path / name).mkdir()
    model, predictions, report = (str(tmp_path / name / f"out.{ext}") for ext in ("olm", "txt", "json"))
    subprocess.run([sys.executable, "-m", "olcli", "train", LETTER, "--oaa", "26", "-b", "16", "-f", model, "-p",
                    predictions, "--report", report, "--quiet", *args], check=True)
    with open(report) as f:
        summary = json.load(f)
    for key in ("examples_per_second", "elapsed_seconds", "compile_seconds", "threads"):   # clocks, the option
        summary.pop(key, None)
    here = str(tmp_path / name)   # the files' paths
    summary = {key: value for key, value in summary.items() if not (isinstance(value, str) and here in value)}
    with open(model, "rb") as f, open(predictions, "rb") as g:
        return f.read(), g.read(), summary


@pytest.mark.parametrize("extra", [[], ["--mix-members", "3"], ["--passes", "3", "--cache", "CACHE", "-k"]])
def test_the_command_line_writes_the_same_files_with_one_thread_or_two(tmp_path, extra):
    """olcli train --oaa 26 (the default: its two members; three; three passes with holdout)
    writes the same model, predictions and report with --threads 1 and 2."""
    extra = [str(tmp_path / "c.cache") if a == "CACHE" else a for a in extra]
    one = _cli(tmp_path, "one", "--threads", "1", *extra)
    two = _cli(tmp_path, "two", "--threads", "2", *extra)
    assert one[0] == two[0] and one[1] == two[1]
    assert {k: v for k, v in one[2].items() if "time" not in k} == {k: v for k, v in two[2].items() if "time" not in k}


LINES = [f"{1 + i % 5} |a f{i % 17} g{i % 7}:0.5 h{i % 3}" for i in range(300)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_learns_with_workers_of_its_own():
    """A process that used the members' threads forks (multiprocessing's default on Linux): the
    child's chunks of 64 examples or more are learned (its own worker threads), not left waiting
    for the parent's, which the child does not have."""
    Learner(oaa=5).learn(LINES[:100])
    pid = os.fork()
    if pid == 0:   # the child: exit 0 once it learned, 3 on an error
        try:
            Learner(oaa=5).learn(LINES[100:300])
        except BaseException:
            os._exit(3)
        os._exit(0)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child did not learn its chunk within 60 s")


def test_an_interrupt_while_the_parts_learn_ends_after_the_whole_chunk():
    """A KeyboardInterrupt (Python's own SIGINT handler) that arrives while the two parts learn is
    raised once the chunk is whole: members' rows, scalars, counters and report sums are those of
    the chunk learned on one thread, never the parts' rows without the mixture's bookkeeping."""
    interrupted = Learner(oaa=5)
    kernels = interrupted._chunks.kernels

    class Slow:
        def __getattr__(self, name):
            return getattr(kernels, name)

        def learn_part(self, *args):   # on a worker, while the main thread waits for the parts
            if args[4] == 0:
                signal.raise_signal(signal.SIGINT)   # handled by the main thread, as a Ctrl-C
            time.sleep(0.2)
            return kernels.learn_part(*args)

    interrupted._chunks.kernels = Slow()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupted.learn(LINES[:200])
    finally:
        signal.signal(signal.SIGINT, previous)
    whole = Learner(oaa=5)
    whole.use_threads(False)
    whole.learn(LINES[:200])
    assert np.array_equal(interrupted.model.pool.dense(), whole.model.pool.dense())
    assert np.array_equal(interrupted.model.scalars, whole.model.scalars)
    assert np.array_equal(interrupted.model.counters, whole.model.counters)
    assert np.array_equal(interrupted.tally.stats, whole.tally.stats)
