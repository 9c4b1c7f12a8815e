"""The pool's rows of a batch's hashed indices (row_pool.RowPool.rows_for), in one pass."""

from olcli.engine.jit import njit


@njit(cache=True, nogil=True)
def look_up(pool_index, index, rows, missing):
    """rows[j] = pool_index[index[j]] for every j, and the positions j whose row is 0 (a
    hashed index no example has brought yet) in missing[:count], in order; returns count,
    or -1 - j for the first j whose index[j] is outside pool_index (nothing is read there).
    ``rows`` and ``missing`` as long as ``index``. One pass over the indices: NumPy's take,
    its cast of int32 positions to int64 and the test for 0 were three (~7% of learning the
    text generator's lines with the default, perf)."""
    size = len(pool_index)
    count = 0
    for j in range(len(index)):
        h = index[j]
        if h < 0 or h >= size:
            return -1 - j
        row = pool_index[h]
        rows[j] = row
        if row == 0:
            missing[count] = j
            count += 1
    return count
