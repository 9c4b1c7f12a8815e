"""Bookkeeping shared by ScInOL1 and ScInOL2 (Kempka, Kotłowski, Warmuth 2019,
Algorithms 1 and 2): slots G (negative gradient sum), S2 (sum of squared
gradients) and M (max |x_i|) come first in both tables; slot 3 is beta (ScInOL1)
or eta (ScInOL2), both starting at eps.

Also ``prefetch`` (one row) and ``prefetch_rows`` (an example's rows), used by
these kernels, gd's, the mixture's and cbify's: a learning kernel's time goes
largely to waiting for its table's rows (a 2^18-row table of 4 slots is 8 MB,
more than the caches nearest the core), one row after the other.
"""

import math

import numpy as np
from olcli.engine import merge_common
from olcli.engine.jit import cgutils, intrinsic, njit, types

G, S2, M, WEALTH = 0, 1, 2, 3


@intrinsic
def prefetch(typingctx, state, i, slot):
    """Hint the CPU to bring ``state[i, slot]`` (2-d) into its caches: LLVM's
    llvm.prefetch (read, keep in all levels), which loads nothing and cannot fault."""
    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        at = [context.cast(builder, value, kind, types.intp) for value, kind in zip(args[1:], signature.args[1:])]
        _prefetch_call(builder, cgutils.get_item_pointer(context, builder, array_type, array, at))
        return context.get_dummy_value()

    return types.none(state, i, slot), codegen


def _prefetch_call(builder, pointer):
    """llvm.prefetch(pointer, read, keep in all levels, data), declared once per module for a byte pointer."""
    from llvmlite import ir

    i32 = ir.IntType(32)
    prefetch = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32]),
        "llvm.prefetch.p0")
    builder.call(prefetch, [builder.bitcast(pointer, prefetch.function_type.args[0]), i32(0), i32(3), i32(1)])


@intrinsic
def prefetch_at(typingctx, array, i):
    """``prefetch`` of ``array[i]`` (1-d)."""
    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        made = context.make_array(array_type)(context, builder, args[0])
        at = [context.cast(builder, args[1], signature.args[1], types.intp)]
        _prefetch_call(builder, cgutils.get_item_pointer(context, builder, array_type, made, at))
        return context.get_dummy_value()

    return types.none(array, i), codegen


@njit(inline="always")
def prefetch_rows(state, index, lo, hi, offset):
    """Ask for the rows of the example's features (index[lo:hi]) and of as many
    features after them (usually the next example's, which the parser writes
    next) before the kernel reads any: the memory fetches then overlap instead
    of coming one at a time. A hint only: no result changes. Both ends of each
    row, which may straddle two cache lines."""
    last = state.shape[1] - 1
    for j in range(lo, min(hi + (hi - lo), len(index))):
        i = offset + index[j]
        prefetch(state, i, 0)
        prefetch(state, i, last)


@njit(inline="always")
def theta_and_scale(state, i):
    """theta = G_i / sqrt(S2_i + M_i**2) and that square root (0/0 = 0)."""
    scale = math.sqrt(state[i, S2] + state[i, M] * state[i, M])
    if scale == 0.0:
        return 0.0, 0.0
    return state[i, G] / scale, scale


@njit(inline="always")
def raise_max(state, i, x, epsilon):
    """M_i <- max(M_i, |x_i|) before predicting. A row whose M_i is still 0 has
    never been touched: its slot 3 gets its initial value eps now, so that
    unseen rows stay all-zero (and sparse models sparse)."""
    if state[i, M] == 0.0:
        state[i, WEALTH] = epsilon
    state[i, M] = max(state[i, M], abs(x))


@njit(inline="always")
def accumulate(state, i, gx):
    """After the loss: G_i -= g x_i; S2_i += (g x_i)**2."""
    state[i, G] -= gx
    state[i, S2] += gx * gx


# ---------------------------------------------------------------------------
# Merging learners trained on separate shards (plain NumPy; the rules are in
# scinol1.merge and scinol2.merge).

def all_thetas_and_scales(state):
    """``theta_and_scale`` for every row at once (0/0 = 0)."""
    scale = np.sqrt(state[:, S2] + state[:, M] * state[:, M])
    theta = np.divide(state[:, G], scale, out=np.zeros(len(scale)), where=scale != 0.0)
    return theta, scale


def merged_statistics(base, shards, active, grown, weights):
    """What both ScInOL merges share, over the shards ``active`` (that learned),
    given ``grown`` (dS2_k = S2_k - S2_base, the squared gradients shard k added
    to each row: the averaging weights) and the shards' ``weights`` (both of
    shape (shards, rows)):

    - ``updated``: rows some shard added squared gradients to;
    - ``w``: the weights' mean with weights dS2_k;
    - ``s2`` = S2_base + sum_k dS2_k; ``m`` = max_k M_k;
    - ``touched`` (shards, rows): shard k has touched the row (M_k > 0), so its
      slot 3 holds a value that started from eps or the base's.
    """
    w, total = merge_common.weighted_mean(weights, grown)
    maxima = merge_common.column(shards, active, M)
    return {
        "updated": total > 0.0,
        "w": w,
        "s2": base[:, S2] + total,
        "m": np.maximum(base[:, M], maxima.max(axis=0)),
        "touched": maxima > 0.0,
    }
