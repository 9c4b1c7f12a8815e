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

A hazard found: with ``borrowed`` inlined (the
overload below is ``inline="always"``), a kernel that borrows ``stats`` and calls an
``inline="always"`` helper doing ``stats[10] += w; b = int(sigmoid(p) * 65536);
auc[0 if label == 1.0 else 1, b] += w`` lost the store to ``auc``: LLVM deleted it. With
``@overload(borrowed)`` (not inlined) the store was kept. The uses here (the parser's input
and feature spec, read only; its buffers in ``parse_into``) are checked by the tests; a new
use must be checked the same way (every output compared with and without the view).
"""

from olcli.engine.jit import carray, intrinsic, overload, types


@intrinsic
def _pointer(typingctx, address, dtype):
    """The integer ``address`` as a pointer to ``dtype`` elements."""
    signature = types.CPointer(dtype.dtype)(address, dtype)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

    return signature, codegen


def borrowed(array):
    """A view of ``array`` (C-contiguous) without reference counting; any other
    layout is returned as it is. Compiled code only."""
    raise NotImplementedError("borrowed() is for compiled kernels")


@overload(borrowed, inline="always")
def _borrowed(array):
    if not isinstance(array, types.Array):
        return None
    if array.layout != "C":
        return lambda array: array
    return lambda array: carray(_pointer(array.ctypes.data, array.dtype), array.shape)
