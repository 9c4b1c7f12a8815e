"""run.PassLoop, the pass loop both drivers share (the local run, olcli/run.py's ``run``, and
the Dask run, olcli/scaleout.py's ``ScaleOut.run``): it runs the driver's pass and yields a
record after each, as River's iter_progressive_val_score yields records for a printer."""

import numpy as np

from olcli.engine.records import H_LOSS, H_WEIGHT
from olcli.learner import Learner
from olcli.run import PassLoop, PassRecord, RunOptions


def _scripted_driver(learner, losses):
    """A driver whose pass k leaves the holdout sums at losses[k-1] over a held-out weight
    of 1 (each pass's own sums, as a cluster's pass leaves them) and learns one example."""
    def one_pass(number):
        learner.learn([f"{number} | a"])
        learner.tally.holdout[H_LOSS], learner.tally.holdout[H_WEIGHT] = losses[number - 1], 1.0
    return one_pass


def test_the_loop_yields_a_record_per_pass_and_stops_early():
    learner = Learner("sgd", bits=4)
    options = RunOptions(sources=[], learn=True, passes=6, holdout_period=2, early_terminate=2)
    loop = PassLoop(learner, options)
    weights = []
    one_pass = _scripted_driver(learner, [3.0, 2.0, 2.5, 2.25, 1.0, 0.5])
    records = []
    for record in loop.passes(one_pass):
        records.append(record)
        weights.append(learner.weights().copy())
    assert records == [PassRecord(1, 3.0, 1, False), PassRecord(2, 2.0, 2, False), PassRecord(3, 2.5, 2, False),
                       PassRecord(4, 2.25, 2, True)]
    loop.keep_best()   # the best pass's model (pass 2's) is put back
    assert np.array_equal(learner.weights(), weights[1])


def test_without_holdout_the_records_carry_no_loss_and_every_pass_runs():
    learner = Learner("sgd", bits=4)
    options = RunOptions(sources=[], learn=True, passes=3, holdout_period=0)
    records = list(PassLoop(learner, options).passes(_scripted_driver(learner, [1.0, 1.0, 1.0])))
    assert records == [PassRecord(1, None, None, False), PassRecord(2, None, None, False),
                       PassRecord(3, None, None, True)]
