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
intrinsic emits its code in the calling function without that pass. Numba has
one such overload of its own, ``bool()`` of an optional value, and the pass drops
any store through a borrowed view that is the view's last use (a view is a call's
result, which the pass never traces). So the ahead-of-time build compiles every
kernel with the pass refused (``dead_code_elimination_refused``): a kernel that
would go through it stops the build, named. tests/test_borrowed.py shows the loss
and the refusal.

``lend_table``, ``lend_settings``, ``lend_batch`` and ``lend_tally``: a kernel
call's records with borrowed views of their arrays, which a loop takes first
(``driver.run_binary``, ``multiclass.run_multiclass``, the mixture's entry
points, ``cb_loop.cbify_loop``). Those loops are inlined into entry points that
pass them the entry's own arguments; an array made in the kernel and passed to
them would be freed by Numba at its last use, the borrow, and the view would
dangle.
"""

import contextlib

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


class DeadCodeElimination(RuntimeError):
    """Numba was about to run its dead code elimination on a kernel (module docstring)."""


@njit
def release(owners):
    """The end of a loop's borrowing: a use of ``owners`` (the arrays a kernel made and
    took borrowed views of), so that Numba frees none of them before this call."""
    return len(owners)


@contextlib.contextmanager
def dead_code_elimination_refused(prefix: str = "olcli."):
    """Within: compiling a function of a module whose name starts with ``prefix`` raises
    DeadCodeElimination, naming it, where Numba would run its dead code elimination
    on it (after inlining an overload, or a closure). Numba only; restored after."""
    from numba.core import inline_closurecall, typed_passes

    originals = [(module, module.dead_code_elimination) for module in (typed_passes, inline_closurecall)]

    def refusing(original):
        def checked(func_ir, *args, **kwargs):
            if func_ir.func_id.modname.startswith(prefix):
                raise DeadCodeElimination(f"Numba's dead code elimination would run on "
                                          f"{func_ir.func_id.modname}.{func_ir.func_id.func_qualname} "
                                          f"(engine/borrowed.py: it can drop stores through borrowed views)")
            return original(func_ir, *args, **kwargs)
        return checked

    for module, original in originals:
        module.dead_code_elimination = refusing(original)
    try:
        yield
    finally:
        for module, original in originals:
            module.dead_code_elimination = original


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

