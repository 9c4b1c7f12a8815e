"""Borrowed views of arrays inside the kernels, without reference counting.

Numba counts the references to an array (an atomic increment and decrement of
the count of the array's owner) each time a compiled function takes it as an
argument or a variable takes it. In a loop that calls a helper for every token
or every example that counting cost more than the work itself: about half of
the parser's and the learning loops' time. A *borrowed* view is the same
memory, shape and type without an owner, so counting it does nothing. It is
valid only while the array it was taken from is alive: a kernel borrows its
own arguments (which its caller holds) for the length of the call, and never
returns or stores the view.

Why ``borrowed`` is an intrinsic and the engine has no ``@overload(...,
inline="always")``: after Numba inlines such an overload into a function it runs
its dead code elimination there, which drops an assignment into an array
(``a[i] = x``) when it cannot trace the array to an argument of the function,
and it does not trace a variable that merges two branches (a phi). The learning
loops' ``driver._account`` writes the AUC histogram through such a variable:
with ``borrowed`` an inlined overload, the default's reports lost their AUC. An
intrinsic emits its code in the calling function without that pass.
tests/test_borrowed.py shows the loss with an inlined overload and checks that
the engine declares none.

``lend_table``, ``lend_settings``, ``lend_batch`` and ``lend_tally``: a kernel
call's records with borrowed views of their arrays, which a loop takes first
(``driver.run_binary``, ``multiclass.run_multiclass``, the mixture's entry
points).
"""

from olcli.engine.jit import cgutils, intrinsic, njit, types
from olcli.engine.records import Batch, Settings, Table, Tally


@intrinsic
def borrowed(typingctx, array):
    """A view of ``array`` (any layout) without an owner, so that counting its
    references does nothing. Compiled code only. An intrinsic, not an inlined
    overload: its code is emitted in the calling function, whose compiler then sees
    the owner is NULL and drops the counting calls altogether."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.return_type)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return array(array), codegen


@njit(inline="always")
def lend_table(table):
    """``table`` with borrowed views of its arrays."""
    return Table(borrowed(table.state), borrowed(table.counters), borrowed(table.scalars))


@njit(inline="always")
def lend_settings(settings):
    return Settings(borrowed(settings.params), settings.loss, settings.tau, settings.clip, settings.learn,
                    settings.block_rows, settings.classes, settings.softmax, settings.min_prediction,
                    settings.max_prediction)


@njit(inline="always")
def lend_batch(batch):
    return Batch(borrowed(batch.labels), borrowed(batch.importance), borrowed(batch.base), borrowed(batch.row_ptr),
                 borrowed(batch.index), borrowed(batch.value), borrowed(batch.feature_count))


@njit(inline="always")
def lend_tally(tally):
    return Tally(borrowed(tally.stats), borrowed(tally.auc), borrowed(tally.progress), borrowed(tally.holdout))

