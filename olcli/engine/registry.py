"""The algorithms, as data: name -> engine code, hyper-parameters and defaults.

This table drives the CLI's choices, the model header and the tests. It is
plain Python so that ``olcli --help`` can read it without importing numba.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Algorithm:
    name: str
    code: int                 # the switch value in engine/driver.py
    module: str               # olcli.engine.<module> holds SLOTS and the kernels
    params: dict = field(default_factory=dict)   # name -> default, in kernel order
    paper: str = ""


ALGORITHMS = {
    "adagrad": Algorithm(
        name="adagrad",
        code=0,
        module="adagrad",
        params={"eta": 0.3, "delta": 1e-6},
        paper="Duchi, Hazan, Singer 2010 (techreport), Figure 1, Eq. (4), diagonal case §6",
    ),
}

DEFAULT_ALGORITHM = "adagrad"


def slots(name: str) -> tuple:
    """Names of the per-coordinate state columns (imports the kernel module)."""
    import importlib

    return importlib.import_module(f"olcli.engine.{ALGORITHMS[name].module}").SLOTS
