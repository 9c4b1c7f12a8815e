"""Examples given as a matrix, ``(X, y[, weight])`` with X a NumPy array or a SciPy
sparse matrix, as a Batch: column j is the feature with libsvm index j (hashed as
libsvm input is), so ``(X, y)`` and the libsvm lines ``y j:X[j] ...`` give the same batch."""

import numpy as np

from olcli.engine.records import Batch
from olcli.errors import DataError, UsageError


def matrix_batch(learner, X, y, weight=None) -> Batch:
    from olcli.engine.parse import csr_examples

    m = learner.model
    if m.interactions:
        raise UsageError("interactions need namespaces: give VW lines, not a matrix, to a learner "
                         "with interactions")
    if m.input_format is None:
        m.input_format = "libsvm"
    elif m.input_format != "libsvm":
        raise UsageError(f"the model was trained on {m.input_format} input; a matrix is libsvm input "
                         "(column j = libsvm index j) and would hash features differently")
    indptr, indices, data, n = _csr_parts(X)
    labels = np.full(n, np.nan) if y is None else _vector(y, n, "y")
    importance = np.ones(n) if weight is None else _vector(weight, n, "weight")
    bad = np.flatnonzero(~np.isfinite(data))
    if bad.size:
        row = int(np.searchsorted(indptr, bad[0], side="right") - 1)
        raise DataError(f"X row {row}, column {int(indices[bad[0]])}: NaN or infinite value ({data[bad[0]]})")
    if y is not None and not np.all(np.isfinite(labels)):
        row = int(np.flatnonzero(~np.isfinite(labels))[0])
        raise DataError(f"y[{row}]: NaN or infinite label ({labels[row]})")
    if not np.all(np.isfinite(importance) & (importance >= 0)):
        row = int(np.flatnonzero(~(np.isfinite(importance) & (importance >= 0)))[0])
        raise DataError(f"weight[{row}]: importance must be a finite number >= 0 (got {importance[row]})")
    keep = learner.feature_spec.namespace_mode[ord(" ")] == 0
    mask = (1 << m.bits) - 1
    out_labels, row_ptr, index, value, feature_count, bad_row = csr_examples(
        indptr, indices, data, labels, mask, (1 << m.bits) if m.constant else -1, learner.label_kind, keep)
    if bad_row >= 0:
        wanted = (f"a class number 0..{m.classes}" if m.classes else "-1 or +1 (or 0/1) for this loss")
        raise DataError(f"y[{bad_row}]: label must be {wanted} (got {labels[bad_row]:g})")
    return Batch(out_labels, importance, np.zeros(n), row_ptr, index, value, feature_count)


def _refuse_complex(values, what: str) -> None:
    if np.iscomplexobj(values):
        raise DataError(f"{what} has complex values (dtype {np.asarray(values).dtype}): give real numbers "
                        "(the imaginary part would be dropped)")


def _vector(values, n: int, what: str) -> np.ndarray:
    _refuse_complex(values, what)
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if out.shape[0] != n:
        raise UsageError(f"{what} has {out.shape[0]} entries but X has {n} rows")
    return np.ascontiguousarray(out)


def _csr_parts(X):
    """(indptr int64, indices int64, data float64, rows) of a dense or sparse matrix,
    column indices increasing within a row."""
    if hasattr(X, "tocsr"):
        csr = X.tocsr()
        if csr.ndim != 2:
            raise UsageError("X must be a 2-dimensional matrix")
        _refuse_complex(csr.data, "X")
        if csr.indices.size and int(csr.indices.min()) < 0:
            at = int(np.flatnonzero(np.asarray(csr.indices) < 0)[0])
            row = int(np.searchsorted(csr.indptr, at, side="right") - 1)
            raise DataError(f"X row {row}: negative column index {int(csr.indices[at])} (a damaged sparse matrix; "
                            "column indices are 0 or more)")
        if not csr.has_sorted_indices:
            csr = csr.sorted_indices()
        return (np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64),
                np.asarray(csr.data, np.float64), csr.shape[0])
    _refuse_complex(X, "X")
    dense = np.asarray(X, dtype=np.float64)
    if dense.ndim == 1:
        dense = dense.reshape(1, -1)
    if dense.ndim != 2:
        raise UsageError(f"X must be a 2-dimensional matrix (got {dense.ndim} dimensions)")
    nonzero = dense != 0.0
    rows, columns = np.nonzero(nonzero)
    indptr = np.zeros(dense.shape[0] + 1, np.int64)
    np.cumsum(nonzero.sum(axis=1), out=indptr[1:])
    return indptr, columns.astype(np.int64), dense[rows, columns], dense.shape[0]
