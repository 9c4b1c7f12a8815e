"""Feature names, VW style, for --audit and --invert-hash.

A linear feature is ``namespace^name`` (just ``name`` in the default namespace,
the libsvm index for libsvm input), a generated one joins its components with
``*`` (``T^abc*f^x``), and the constant is ``Constant``. Names come from a
record-mode parse (parsing.parse_chunk(record=True)): byte spans into the chunk
for linear features, component positions for products.
"""

import numpy as np

from olcli.engine.features import N_COMPONENTS, N_NAME_END, N_NAME_START, N_NS_END, N_NS_START


def _text(data: np.ndarray, start: int, end: int) -> str:
    return data[start:end].tobytes().decode("utf-8", errors="replace")


def name_of(names: np.ndarray, data: np.ndarray, position: int) -> str:
    row = names[position]
    if row[N_NAME_START] >= 0:
        namespace = _text(data, row[N_NS_START], row[N_NS_END])
        name = _text(data, row[N_NAME_START], row[N_NAME_END])
        return f"{namespace}^{name}" if namespace else name
    components = [c for c in row[N_COMPONENTS:] if c >= 0]
    if components:
        return "*".join(name_of(names, data, int(c)) for c in components)
    return "Constant"


class FeatureNames:
    """index -> name for the features seen in this run (Python work per new
    index, not per occurrence)."""

    def __init__(self, rows: int):
        self.names = {}
        self._named = np.zeros(rows, bool)

    def add(self, parsed, data: np.ndarray) -> None:
        n = int(parsed.row_ptr[parsed.n_examples])
        index = parsed.index[:n]
        new = np.flatnonzero(~self._named[index])
        if new.size == 0:
            return
        _, first = np.unique(index[new], return_index=True)
        for position in new[first]:
            self.names[int(index[position])] = name_of(parsed.names, data, int(position))
        self._named[index[new]] = True
