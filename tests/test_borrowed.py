"""Borrowed views (olcli/engine/borrowed.py) and the Numba pass they stay clear of.

After Numba inlines an ``@overload(..., inline="always")`` into a function (its own ``bool()``
of an optional value is one), its dead code elimination drops an assignment into an array it
cannot trace to an argument: the AUC histogram that ``driver._account`` writes through a
variable merging two branches, or any store through a borrowed view that is the view's last
use. The tests below show both losses, that the ahead-of-time build's guard
(``dead_code_elimination_refused``, under which every kernel of the build is compiled) stops
such a compilation, and that a loop on lent records keeps its stores.
"""

import numpy as np
import pytest

pytest.importorskip("numba")

from numba import njit  # noqa: E402
from numba.extending import overload  # noqa: E402

from olcli import aot  # noqa: E402

aot.activate_jit()   # the engine's kernels as Numba's (their helpers are inlined into ours)

from olcli.engine.borrowed import borrowed  # noqa: E402

def _identity(x):
    return x


@overload(_identity, inline="always")
def _identity_inline(x):
    return lambda x: x


def _run(kernel):
    from olcli.engine.records import Settings, new_tally

    tally = new_tally()
    settings = Settings(np.zeros(3), 1, 0.5, False, True, 0, 0, False, np.nan, np.nan)
    labels = np.array([1.0, -1.0, 1.0, -1.0])
    predictions = np.array([0.1, -0.3, 2.0, 0.4])
    kernel(tally, np.zeros(20), settings, labels, predictions)
    return tally


def test_a_loop_on_lent_records_keeps_its_stores():
    from olcli.engine.borrowed import lend_tally
    from olcli.engine.driver import account_binary

    def lent(tally, counters, settings, labels, predictions):
        lent_tally = lend_tally(tally)
        for i in range(len(labels)):
            account_binary(lent_tally, counters, settings, False, 3, labels[i], 1.0, predictions[i])

    tally = _run(njit(lent))
    assert tally.auc[0].sum() == 2.0 and tally.auc[1].sum() == 2.0
    assert tally.stats.sum() > 0


def test_an_inlined_overload_loses_the_histogram():
    """The control: the same bookkeeping on the caller's own arrays, with one inlined
    overload in the function, loses every store into the histogram (and none into stats)."""
    from olcli.engine.driver import account_binary

    def plain(tally, counters, settings, labels, predictions):
        for i in range(len(labels)):
            account_binary(tally, counters, settings, False, 3, labels[i], _identity(1.0), predictions[i])

    tally = _run(njit(plain))
    assert tally.auc.sum() == 0.0
    assert tally.stats.sum() > 0


def _store_through_a_view(a, flag, i):
    view = borrowed(a)
    on = bool(flag)   # Numba's bool() of an optional value: an overload it inlines
    view[i] = 7.0
    return on


def test_a_store_through_a_view_is_lost_after_an_inlined_overload():
    """The second control: the store through the view is its last use, and is dropped."""
    a = np.zeros(3)
    njit(_store_through_a_view)(a, None, 1)
    assert a[1] == 0.0


def test_the_build_guard_stops_a_kernel_that_would_lose_stores():
    from olcli.engine.borrowed import DeadCodeElimination, dead_code_elimination_refused

    with dead_code_elimination_refused(prefix=__name__):
        with pytest.raises(Exception, match="dead code elimination would run on .*_store_through_a_view"):
            njit(_store_through_a_view)(np.zeros(3), None, 1)
    a = np.zeros(3)   # restored: the same kernel compiles (and loses its store) again
    njit(_store_through_a_view)(a, None, 1)
    assert a[1] == 0.0
    assert issubclass(DeadCodeElimination, RuntimeError)
