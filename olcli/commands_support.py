"""Helpers shared by the commands and the text writers."""

import numpy as np

from olcli.engine.registry import ALGORITHMS


def current_weights(model) -> np.ndarray:
    """Every row's weight as the model predicts with it (lazy terms paid)."""
    from olcli.engine.driver import weights

    algorithm = ALGORITHMS[model.algorithm]
    params = np.array([model.params[name] for name in algorithm.params], dtype=np.float64)
    return weights(algorithm.code, model.state, params, model.counters["rounds"])
