"""The algorithms, as data: name -> engine code, hyper-parameters, CLI options.

This table drives the CLI's algorithm flags and the options each accepts, the
model header, and the tests (every entry is compared with its reference in
tests/naive.py). It is plain Python so that ``olcli --help`` can read it
without importing numba.
"""

from dataclasses import dataclass

# CLI option (as the train command names its parameter) -> how it is spelled.
OPTION_FLAGS = {
    "learning_rate": "-l/--learning-rate",
    "delta": "--delta",
    "l1": "--l1",
    "l2": "--l2",
    "radius": "--radius",
    "ftrl_beta": "--ftrl-beta",
    "epsilon": "--epsilon",
}


@dataclass(frozen=True)
class Algorithm:
    name: str
    code: int                 # the switch value in engine/driver.py
    module: str               # olcli.engine.<module>: SLOTS, PARAMS and the kernels
    params: dict              # parameter -> default, in the kernel's PARAMS order
    options: dict             # CLI option -> parameter
    summary: str = ""
    paper: str = ""
    unbounded_loss_clipped: bool = False   # clip dloss/dp to [-1, 1] for unbounded losses


ALGORITHMS = {a.name: a for a in [
    Algorithm(
        name="adagrad", code=0, module="adagrad",
        params={"eta": 0.3, "delta": 1e-6, "l1": 0.0, "l2": 0.0, "radius": 0.0},
        options={"learning_rate": "eta", "delta": "delta", "l1": "l1", "l2": "l2", "radius": "radius"},
        summary="AdaGrad, diagonal, composite mirror descent (the default).",
        paper="Duchi, Hazan, Singer 2010 (techreport), Figure 1 and Eq. (4); "
              "§6.1 Eq. (24) for --l1, §6.2 Eq. (25) for --l2; --radius: Streeter & McMahan 2010",
    ),
    Algorithm(
        name="adagrad-dual", code=1, module="adagrad_dual",
        params={"eta": 0.3, "delta": 1e-6, "l1": 0.0},
        options={"learning_rate": "eta", "delta": "delta", "l1": "l1"},
        summary="AdaGrad, diagonal, primal-dual (regularized dual averaging) form.",
        paper="Duchi, Hazan, Singer 2010 (techreport), Figure 1 and Eq. (3); §6.1 Eq. (22)",
    ),
    Algorithm(
        name="ftrl", code=2, module="ftrl",
        params={"alpha": 0.5, "beta": 1.0, "l1": 0.0, "l2": 0.0},
        options={"learning_rate": "alpha", "ftrl_beta": "beta", "l1": "l1", "l2": "l2"},
        summary="FTRL-Proximal with per-coordinate rates (VW's --ftrl).",
        paper="McMahan et al. 2013, Algorithm 1; derivation in adaptive-ftrl-notes-qian.md",
    ),
    Algorithm(
        name="scinol1", code=3, module="scinol1",
        params={"epsilon": 1.0},
        options={"epsilon": "epsilon"},
        summary="ScInOL1: scale-invariant, no learning rate.",
        paper="Kempka, Kotłowski, Warmuth 2019, Algorithm 1",
        unbounded_loss_clipped=True,
    ),
    Algorithm(
        name="scinol2", code=4, module="scinol2",
        params={"epsilon": 1.0},
        options={"epsilon": "epsilon"},
        summary="ScInOL2: scale-invariant, no learning rate.",
        paper="Kempka, Kotłowski, Warmuth 2019, Algorithm 2",
        unbounded_loss_clipped=True,
    ),
    Algorithm(
        name="sgd", code=5, module="sgd",
        params={"eta": 0.5},
        options={"learning_rate": "eta"},
        summary="Plain SGD with rate eta/sqrt(t) (the papers' baseline).",
        paper="online gradient descent, eta_t = eta/sqrt(t) (ScInOL 2019, §4)",
    ),
]}

DEFAULT_ALGORITHM = "adagrad"


def kernel_module(name: str):
    import importlib

    return importlib.import_module(f"olcli.engine.{ALGORITHMS[name].module}")


def slots(name: str) -> tuple:
    """Names of the per-coordinate state columns (imports the kernel module)."""
    return kernel_module(name).SLOTS


def supporting(option: str) -> list:
    """The algorithms that accept a CLI option."""
    return [a.name for a in ALGORITHMS.values() if option in a.options]
