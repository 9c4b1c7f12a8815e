"""The algorithms, as data: the one place an algorithm is described.

Each entry names its kernel module (``olcli.engine.<module>``: ``SLOTS``,
``PARAMS``, the kernels ``predict``/``update``/``weight``, the cached entry points
and ``merge``), its state slots, and each hyper-parameter with its default,
allowed range, help text and command-line option. From this table come the
CLI's algorithm flags and hyper-parameter options with their help, the Python
API's keywords and their validation, the model header, the README's algorithm
table and the tests (every entry is checked against its module and compared
with its reference in tests/naive.py). It is plain Python so that
``olcli --help`` can read it without importing numba.

Adding an algorithm: write its module, add one entry here.
"""

import math
from dataclasses import dataclass

from olcli.errors import UsageError as ParameterError  # exit code 2 on the command line


@dataclass(frozen=True)
class Option:
    """A command-line option that sets a hyper-parameter (shared by the
    algorithms whose parameter names it, e.g. -l sets AdaGrad's eta and FTRL's alpha)."""
    flags: tuple
    help: str


# Option name (the train command's parameter) -> how it is spelled.
OPTIONS = {
    "learning_rate": Option(("-l", "--learning-rate"), "learning rate"),
    "delta": Option(("--delta",), "AdaGrad delta, added to sqrt(sum g^2)"),
    "l1": Option(("--l1",), "L1 regularization strength"),
    "l2": Option(("--l2",), "L2 regularization strength"),
    "radius": Option(("--radius",), "keep every weight in [-R, R] (0: no bound)"),
    "ftrl_beta": Option(("--ftrl-beta",), "FTRL beta"),
    "epsilon": Option(("--epsilon",), "ScInOL epsilon (initial wealth)"),
}


@dataclass(frozen=True)
class Param:
    name: str                  # the kernel's PARAMS entry and the Python API keyword
    default: float
    option: str                # key of OPTIONS
    low: float = 0.0           # allowed: value > low (>= low when low_inclusive), finite
    low_inclusive: bool = False
    help: str = ""

    @property
    def flag(self) -> str:
        return "/".join(OPTIONS[self.option].flags)

    def check(self, value: float) -> float:
        """The value as a float, or ParameterError saying what is allowed."""
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ParameterError(f"{self.name} ({self.flag}) must be a number (got {value!r})") from None
        ok = value >= self.low if self.low_inclusive else value > self.low
        if not ok or not math.isfinite(value):
            raise ParameterError(f"{self.name} ({self.flag}) must be {'>=' if self.low_inclusive else '>'} "
                                 f"{self.low:g} and finite (got {value:g})")
        return value


@dataclass(frozen=True)
class Algorithm:
    name: str                  # the flag (--name) and the model header's algorithm
    module: str                # olcli.engine.<module>
    slots: tuple               # per-coordinate state columns (the module's SLOTS)
    params: tuple              # Param, in the module's PARAMS order
    summary: str = ""
    paper: str = ""
    unbounded_loss_clipped: bool = False   # clip dloss/dp to [-1, 1] for unbounded losses
    scalars: tuple = ()        # (name, initial value): the algorithm's global numbers (Table.scalars)

    @property
    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    @property
    def options(self) -> dict:
        """CLI option -> parameter name."""
        return {p.option: p.name for p in self.params}

    def kernels(self):
        """The kernel module (imports numba)."""
        import importlib

        return importlib.import_module(f"olcli.engine.{self.module}")

    def resolve(self, given: dict) -> dict:
        """Every parameter's value: the defaults with ``given`` (by parameter name,
        None = default) applied and checked."""
        known = {p.name: p for p in self.params}
        for name, value in given.items():
            if value is not None and name not in known:
                users = ", ".join(f"--{a.name}" for a in ALGORITHMS.values()
                                  if any(name in (p.name, p.option) for p in a.params)) or "none"
                raise ParameterError(f"{name} is not a hyper-parameter of --{self.name} (it has: "
                                     f"{', '.join(known) or 'none'}; {name} belongs to: {users})")
        params = {name: param.check(param.default if given.get(name) is None else given[name])
                  for name, param in known.items()}
        if self.name == "adagrad" and params["l1"] > 0 and params["l2"] > 0:
            raise ParameterError("--adagrad takes --l1 or --l2, not both (the paper's closed forms, "
                                 "Eq. 24 and Eq. 25, are for one at a time); --ftrl takes both")
        return params


def _eta(default, who):
    return Param("eta", default, "learning_rate", help=f"{who} learning rate eta")


_L1 = Param("l1", 0.0, "l1", low_inclusive=True, help="L1 strength")
_L2 = Param("l2", 0.0, "l2", low_inclusive=True, help="L2 strength")
_DELTA = Param("delta", 1e-6, "delta", low_inclusive=True, help="AdaGrad delta, added to sqrt(sum g^2)")
_EPSILON = Param("epsilon", 1.0, "epsilon", help="initial wealth epsilon")

ALGORITHMS = {a.name: a for a in [
    Algorithm(
        name="adagrad", module="adagrad", slots=("w", "G", "last"),
        params=(_eta(0.3, "AdaGrad"), _DELTA, _L1, _L2,
                Param("radius", 0.0, "radius", low_inclusive=True, help="box radius R (0: none)")),
        summary="AdaGrad, diagonal, composite mirror descent (the default).",
        paper="Duchi, Hazan, Singer 2010 (techreport), Figure 1 and Eq. (4); "
              "§6.1 Eq. (24) for --l1, §6.2 Eq. (25) for --l2; --radius: Streeter & McMahan 2010",
    ),
    Algorithm(
        name="adagrad-dual", module="adagrad_dual", slots=("u", "G"),
        params=(_eta(0.3, "AdaGrad-dual"), _DELTA, _L1),
        summary="AdaGrad, diagonal, primal-dual (regularized dual averaging) form.",
        paper="Duchi, Hazan, Singer 2010 (techreport), Figure 1 and Eq. (3); §6.1 Eq. (22)",
    ),
    Algorithm(
        name="ftrl", module="ftrl", slots=("z", "n"),
        params=(Param("alpha", 0.5, "learning_rate", help="FTRL alpha"),
                Param("beta", 1.0, "ftrl_beta", low_inclusive=True, help="FTRL beta"), _L1, _L2),
        summary="FTRL-Proximal with per-coordinate rates (VW's --ftrl).",
        paper="McMahan et al. 2013, Algorithm 1; derivation in adaptive-ftrl-notes-qian.md",
    ),
    Algorithm(
        name="scinol1", module="scinol1", slots=("G", "S2", "M", "beta"),
        params=(_EPSILON,),
        summary="ScInOL1: scale-invariant, no learning rate.",
        paper="Kempka, Kotłowski, Warmuth 2019, Algorithm 1",
        unbounded_loss_clipped=True,
    ),
    Algorithm(
        name="scinol2", module="scinol2", slots=("G", "S2", "M", "eta"),
        params=(_EPSILON,),
        summary="ScInOL2: scale-invariant, no learning rate.",
        paper="Kempka, Kotłowski, Warmuth 2019, Algorithm 2",
        unbounded_loss_clipped=True,
    ),
    Algorithm(
        name="sgd", module="sgd", slots=("w",),
        params=(_eta(0.5, "SGD"),),
        summary="Plain SGD with rate eta/sqrt(t) (the papers' baseline).",
        paper="online gradient descent, eta_t = eta/sqrt(t) (ScInOL 2019, §4)",
    ),
]}

DEFAULT_ALGORITHM = "adagrad"


def supporting(option: str) -> list:
    """The algorithms that accept a CLI option."""
    return [a.name for a in ALGORITHMS.values() if option in a.options]


def option_help(option: str) -> str:
    """An option's help: what it sets for each algorithm, with the defaults."""
    uses = [f"--{a.name} {p.name} ({p.default:g})" for a in ALGORITHMS.values() for p in a.params
            if p.option == option]
    return f"{OPTIONS[option].help[:1].upper()}{OPTIONS[option].help[1:]}: " + ", ".join(uses) + "."


def get(name: str) -> Algorithm:
    """The registered algorithm, or ParameterError naming the ones there are."""
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ParameterError(f"unknown algorithm {name!r} (olcli has: {', '.join(ALGORITHMS)})") from None
