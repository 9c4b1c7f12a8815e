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

from olcli.errors import UsageError as ParameterError  # exit code 2 on the command line
from olcli.records import Frozen


class Option(Frozen):
    """A command-line option that sets a hyper-parameter (shared by the
    algorithms whose parameter names it, e.g. -l sets AdaGrad's eta and FTRL's alpha).

    A ``switch`` takes no value: given, it sets its parameter to 1 (VW's
    --adaptive); not given, the parameter is left to the algorithm's rules.
    ``implies`` names the algorithm the option selects when no algorithm flag
    is given and the default (DEFAULT_ALGORITHM) does not take it: VW's options
    select VW's default learner, gd (--adaptive, --l1, --l2); an option of one
    other learner selects it (--radius: adagrad). olcli/commands.py says so on
    stderr and in the report (implied_algorithm)."""
    __slots__ = _fields = ("flags", "help", "switch", "implies")

    def __init__(self, flags: tuple, help: str, switch: bool = False, implies: str = ""):
        setter = object.__setattr__
        setter(self, "flags", flags)
        setter(self, "help", help)
        setter(self, "switch", switch)
        setter(self, "implies", implies)


# Option name (the train command's parameter) -> how it is spelled.
OPTIONS = {
    "learning_rate": Option(("-l", "--learning-rate"), "learning rate"),
    "delta": Option(("--delta",), "AdaGrad delta, added to sqrt(sum g^2)", implies="adagrad"),
    "l1": Option(("--l1",), "L1 regularization strength", implies="gd"),
    "l2": Option(("--l2",), "L2 regularization strength", implies="gd"),
    "radius": Option(("--radius",), "keep every weight in [-R, R] (0: no bound)", implies="adagrad"),
    "ftrl_beta": Option(("--ftrl-beta",), "FTRL beta", implies="ftrl"),
    "epsilon": Option(("--epsilon",), "ScInOL epsilon (initial wealth)", implies="scinol2"),
    "power_t": Option(("--power-t",), "power t: the rate decays as t^-power_t (VW's --power_t)"),
    "initial_t": Option(("--initial-t",), "initial t: the round count starts here (VW's --initial_t)"),
    "adaptive": Option(("--adaptive",), "VW's per-feature AdaGrad rates (implies --gd; with any of "
                       "--adaptive/--normalized/--invariant, exactly the ones given are on)",
                       switch=True, implies="gd"),
    "normalized": Option(("--normalized",), "VW's per-feature normalisation by the largest |x| seen "
                         "(implies --gd)", switch=True, implies="gd"),
    "invariant": Option(("--invariant",), "VW's importance-invariant update (implies --gd)",
                        switch=True, implies="gd"),
    "coin_alpha": Option(("--coin-alpha",), "coin betting: initial wealth per coordinate (VW's --ftrl_alpha)"),
    "coin_beta": Option(("--coin-beta",), "coin betting: floor of the gradient-size estimate (VW's --ftrl_beta)"),
    "mix_members": Option(("--mix-members",), "the default's members mixed: the first N of --gd at -l eta, 6 eta, "
                          "20 eta and --coin (4; 2 with --oaa/--softmax)"),
}


class Param(Frozen):
    """One hyper-parameter: ``name`` is the kernel's PARAMS entry and the Python API keyword;
    ``option`` the key of OPTIONS; allowed values are finite and > ``low`` (>= ``low`` when
    ``low_inclusive``); ``added``: added after model files existed, so a file without it gets
    the default, which must be the behaviour from before it existed."""
    __slots__ = _fields = ("name", "default", "option", "low", "low_inclusive", "help", "added")

    def __init__(self, name: str, default: float, option: str, low: float = 0.0, low_inclusive: bool = False,
                 help: str = "", added: bool = False):
        setter = object.__setattr__
        setter(self, "name", name)
        setter(self, "default", default)
        setter(self, "option", option)
        setter(self, "low", low)
        setter(self, "low_inclusive", low_inclusive)
        setter(self, "help", help)
        setter(self, "added", added)

    @property
    def flag(self) -> str:
        return "/".join(OPTIONS[self.option].flags)

    @property
    def switch(self) -> bool:
        return OPTIONS[self.option].switch

    def check(self, value: float) -> float:
        """The value as a float, or ParameterError saying what is allowed."""
        if self.switch:
            if isinstance(value, (bool, int, float)) and value in (0, 1):
                return float(value)
            raise ParameterError(f"{self.name} ({self.flag}) is on or off: True/False or 1/0 (got {value!r})")
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(f"{self.name} ({self.flag}) must be a number (got {value!r})") from None
        ok = value >= self.low if self.low_inclusive else value > self.low
        if not ok or not math.isfinite(value):
            raise ParameterError(f"{self.name} ({self.flag}) must be {'>=' if self.low_inclusive else '>'} "
                                 f"{self.low:g} and finite (got {value:g})")
        return value


class Algorithm(Frozen):
    """One algorithm: ``name`` is the flag (--name) and the model header's algorithm;
    ``module`` is olcli.engine.<module>; ``slots`` its per-coordinate state columns (the
    module's SLOTS); ``params`` its Param, in the module's PARAMS order;
    ``unbounded_loss_clipped``: clip dloss/dp to [-1, 1] for unbounded losses; ``scalars``:
    (name, initial value) of the algorithm's global numbers (Table.scalars), the initial value a
    number or the name of a parameter it starts at; ``rules(given, params, classes) -> params``:
    defaults that depend on what was given and on the number of classes (0: one output)."""
    __slots__ = _fields = ("name", "module", "slots", "params", "summary", "paper", "unbounded_loss_clipped",
                           "scalars", "rules")

    def __init__(self, name: str, module: str, slots: tuple, params: tuple, summary: str = "", paper: str = "",
                 unbounded_loss_clipped: bool = False, scalars: tuple = (), rules: object = None):
        setter = object.__setattr__
        setter(self, "name", name)
        setter(self, "module", module)
        setter(self, "slots", slots)
        setter(self, "params", params)
        setter(self, "summary", summary)
        setter(self, "paper", paper)
        setter(self, "unbounded_loss_clipped", unbounded_loss_clipped)
        setter(self, "scalars", scalars)
        setter(self, "rules", rules)

    def initial_scalars(self, params: dict) -> list:
        """The scalars of a fresh model with these (resolved) hyper-parameters."""
        return [float(params[start]) if isinstance(start, str) else float(start) for _, start in self.scalars]

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

    def resolve(self, given: dict, classes: int = 0) -> dict:
        """Every parameter's value: the defaults with ``given`` (by parameter name,
        None = default) applied and checked; ``classes``: the model's (0: one output), for
        the defaults that depend on it."""
        known = {p.name: p for p in self.params}
        for name, value in given.items():
            if value is not None and name not in known:
                users = ", ".join(f"--{a.name}" for a in ALGORITHMS.values()
                                  if any(name in (p.name, p.option) for p in a.params)) or "none"
                raise ParameterError(f"{name} is not a hyper-parameter of --{self.name} (it has: "
                                     f"{', '.join(known) or 'none'}; {name} belongs to: {users})")
        params = {name: param.check(param.default if given.get(name) is None else given[name])
                  for name, param in known.items()}
        if self.rules is not None:
            params = self.rules(given, params, classes)
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
GD_SWITCHES = ("adaptive", "normalized", "invariant")


def _vw_gd_rules(given: dict, params: dict, classes: int = 0) -> dict:
    """VW's option rules for its default learner (gd.cc gd_setup, as tests/naive_vw.py):

    - none of --adaptive/--normalized/--invariant given: all three are on; as
      soon as one is given, exactly the given ones are;
    - -l not given: 0.5 with adaptive and normalized both on, else 10;
    - plain SGD (neither adaptive nor normalized) with --initial-t not given:
      initial_t = 1 (the rate then starts at eta and decays as (1 + t)^-power_t).

    ``given`` holds what the user gave (None = not given); a model read from a
    file gives everything, so the rules change nothing there."""
    params = dict(params)
    if any(given.get(name) is not None for name in GD_SWITCHES):
        for name in GD_SWITCHES:
            if given.get(name) is None:
                params[name] = 0.0
    adaptive, normalized = params["adaptive"] > 0, params["normalized"] > 0
    if given.get("eta") is None and not (adaptive and normalized):
        params["eta"] = 10.0
    if given.get("initial_t") is None and not adaptive and not normalized:
        params["initial_t"] = 1.0
    return params


MIX_MEMBERS = 4              # the default's members mixed: gd at eta, 6 eta, 20 eta and coin
MIX_MEMBERS_MULTICLASS = 2   # with --oaa/--softmax: gd at eta and 6 eta (olcli/engine/mixture.py, "Members")


def _mix_rules(given: dict, params: dict, classes: int = 0) -> dict:
    """The mixture's number of members: a whole number 1..4 (the first N of gd at -l eta,
    6 eta, 20 eta and coin); not given, 4 for one output and 2 for K classes (mixture.py's
    docstring, "Members", says why). A model read from a file gives it (an older file:
    4, its Param.added default)."""
    params = dict(params)
    members = params["members"]
    if members != int(members) or not 1 <= members <= MIX_MEMBERS:
        raise ParameterError(f"members (--mix-members) must be a whole number 1 to {MIX_MEMBERS} (got {members!r})")
    if given.get("members") is None and classes > 0:
        params["members"] = float(MIX_MEMBERS_MULTICLASS)
    coin = {p.name: p for p in ALGORITHMS["coin"].params}
    changed = [coin[name].flag for name in ("alpha", "beta") if params[name] != coin[name].default]
    if params["members"] < MIX_MEMBERS and changed:
        raise ParameterError(f"{' and '.join(changed)} set the default's coin member, which is mixed only with "
                             f"--mix-members 4 (this run mixes {params['members']:g}"
                             + (", the default with --oaa/--softmax" if given.get("members") is None else "")
                             + f"): add --mix-members 4, or drop {' and '.join(changed)}")
    return params


ALGORITHMS = {a.name: a for a in [
    Algorithm(
        name="adagrad", module="adagrad", slots=("w", "G", "last"),
        params=(_eta(0.3, "AdaGrad"), _DELTA, _L1, _L2,
                Param("radius", 0.0, "radius", low_inclusive=True, help="box radius R (0: none)")),
        summary="AdaGrad, diagonal, composite mirror descent.",
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
        paper="McMahan et al. 2013, Algorithm 1; derivation in M. Qian, Notes on Adaptive Online Learning",
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
        params=(_eta(0.5, "SGD"),
                Param("power_t", 0.5, "power_t", low_inclusive=True, added=True, help="rate decay power"),
                Param("initial_t", 0.0, "initial_t", low_inclusive=True, added=True, help="initial t")),
        summary="Plain SGD with rate eta/(initial_t + t)^power_t, by default eta/sqrt(t) (the papers' baseline).",
        paper="online gradient descent, eta_t = eta/sqrt(t) (ScInOL 2019, §4)",
    ),
    Algorithm(
        name="gd", module="gd", slots=("w", "G", "N"),
        params=(Param("eta", 0.5, "learning_rate",
                      help="learning rate eta (10 unless both adaptive and normalized, as VW)"),
                Param("power_t", 0.5, "power_t", low_inclusive=True, help="rate decay power"),
                Param("initial_t", 0.0, "initial_t", low_inclusive=True, help="initial t (1 for plain SGD)"),
                Param("adaptive", 1.0, "adaptive", low_inclusive=True, help="per-feature AdaGrad rates"),
                Param("normalized", 1.0, "normalized", low_inclusive=True, help="normalised by feature scale"),
                Param("invariant", 1.0, "invariant", low_inclusive=True, help="importance-invariant update"),
                _L1, _L2),
        summary="VW's default learner: normalized, adaptive, importance-invariant SGD.",
        paper="Ross, Mineiro & Langford 2013 (NG/NAG); Karampatziakis & Langford 2011; "
              "Duchi, Hazan & Singer 2011; VW gd.cc",
        scalars=(("normalized_sum_norm_x", "initial_t"), ("total_weight", "initial_t"),
                 ("gravity", 0.0), ("contraction", 1.0)),
        rules=_vw_gd_rules,
    ),
    Algorithm(
        name="coin", module="coin", slots=("w", "Z", "G", "M", "wealth", "L"),
        params=(Param("alpha", 4.0, "coin_alpha", help="initial wealth alpha"),
                Param("beta", 1.0, "coin_beta", low_inclusive=True, help="floor beta of the gradient size L")),
        summary="VW's --coin: per-coordinate Krichevsky-Trofimov coin betting, no learning rate.",
        paper="Orabona & Pál 2016 (KT betting), Orabona & Tommasi 2017 (COCOB); VW ftrl.cc",
        scalars=(("normalized_sum_norm_x", 0.0), ("total_weight", 0.0)),
    ),
    Algorithm(
        name="mix", module="mixture",
        slots=("gd.w", "gd.G", "gd.N", "gd_x6.w", "gd_x6.G", "gd_x6.N", "gd_x20.w", "gd_x20.G", "gd_x20.N",
               "coin.w", "coin.Z", "coin.G", "coin.M", "coin.wealth", "coin.L"),
        params=(Param("eta", 0.5, "learning_rate",
                      help="the gd members' learning rate: eta, 6 eta and 20 eta"),
                Param("power_t", 0.5, "power_t", low_inclusive=True, help="the gd members' rate decay power"),
                Param("initial_t", 0.0, "initial_t", low_inclusive=True, help="the gd members' initial t"),
                Param("alpha", 4.0, "coin_alpha", help="the coin member's initial wealth alpha"),
                Param("beta", 1.0, "coin_beta", low_inclusive=True, help="the coin member's floor beta"),
                Param("members", float(MIX_MEMBERS), "mix_members", low=1.0, low_inclusive=True, added=True,
                      help="the members mixed: the first N of gd at eta, 6 eta, 20 eta and coin "
                           "(4; 2 with --oaa/--softmax)")),
        summary="--gd at -l 0.5, 3 and 10 and --coin on the same features, mixed by exponential weights "
                "on their losses (the default; with --oaa/--softmax the first two).",
        paper="exponentially weighted average forecaster (Cesa-Bianchi & Lugosi 2006, §2.1, §3.3; "
              "Vovk 1990, aggregating algorithm); members as --gd (three rates) and --coin",
        scalars=tuple((f"{member}_{name}", start) for member in ("gd", "gd_x6", "gd_x20")
                      for name, start in (("normalized_sum_norm_x", "initial_t"), ("total_weight", "initial_t"),
                                          ("gravity", 0.0), ("contraction", 1.0)))
                + (("coin_normalized_sum_norm_x", 0.0), ("coin_total_weight", 0.0),
                   ("loss_gd", 0.0), ("loss_gd_x6", 0.0), ("loss_gd_x20", 0.0), ("loss_coin", 0.0),
                   ("labels_seen", 0.0), ("labels_low", 0.0), ("labels_high", 0.0)),
        rules=_mix_rules,
    ),
]}

DEFAULT_ALGORITHM = "mix"   # chosen by benchmarks/defaults_vs_vw.py (docs, "Algorithms")

# Algorithms a model file may name that have no flag (not in ALGORITHMS: not on the
# command line, in help or in the README's table): the default of model format 4 and
# before, which a format-4 file names "mix" (olcli/model.py reads it as "mix-v1"). The
# Python API makes one by name (Learner("mix-v1"), for the tests of old models).
LEGACY = {a.name: a for a in [
    Algorithm(
        name="mix-v1", module="mixture_v1",
        slots=("gd.w", "gd.G", "gd.N", "coin.w", "coin.Z", "coin.G", "coin.M", "coin.wealth", "coin.L",
               "scinol2.G", "scinol2.S2", "scinol2.M", "scinol2.eta"),
        params=(Param("eta", 0.5, "learning_rate", help="the gd member's learning rate"),
                Param("power_t", 0.5, "power_t", low_inclusive=True, help="the gd member's rate decay power"),
                Param("initial_t", 0.0, "initial_t", low_inclusive=True, help="the gd member's initial t"),
                Param("alpha", 4.0, "coin_alpha", help="the coin member's initial wealth alpha"),
                Param("beta", 1.0, "coin_beta", low_inclusive=True, help="the coin member's floor beta"),
                Param("epsilon", 1.0, "epsilon", help="the scinol2 member's initial wealth epsilon")),
        summary="--gd, --coin and --scinol2 mixed by exponential weights: the default of model format 4 and before "
                "(read from old model files only).",
        paper="exponentially weighted average forecaster (Cesa-Bianchi & Lugosi 2006, §2.1, §3.3; "
              "Vovk 1990, aggregating algorithm); members as --gd, --coin, --scinol2",
        unbounded_loss_clipped=True,   # the scinol2 member's derivative, as alone
        scalars=(("gd_normalized_sum_norm_x", "initial_t"), ("gd_total_weight", "initial_t"),
                 ("gd_gravity", 0.0), ("gd_contraction", 1.0),
                 ("coin_normalized_sum_norm_x", 0.0), ("coin_total_weight", 0.0),
                 ("loss_gd", 0.0), ("loss_coin", 0.0), ("loss_scinol2", 0.0),
                 ("labels_seen", 0.0), ("labels_low", 0.0), ("labels_high", 0.0)),
    ),
]}
KNOWN = {**ALGORITHMS, **LEGACY}   # what a model file may name


def supporting(option: str) -> list:
    """The algorithms that accept a CLI option."""
    return [a.name for a in ALGORITHMS.values() if option in a.options]


def option_help(option: str) -> str:
    """An option's help: what it sets for each algorithm, with the defaults."""
    uses = [f"--{a.name} {p.name} ({p.default:g})" for a in ALGORITHMS.values() for p in a.params
            if p.option == option]
    return f"{OPTIONS[option].help[:1].upper()}{OPTIONS[option].help[1:]}: " + ", ".join(uses) + "."


def state_slots(algorithm: Algorithm, params: dict) -> tuple:
    """A model's state columns: its algorithm's slots, but the default mixing fewer than its
    four members (params' members) keeps only its gd members' columns, 3 each (the members
    mixed are the first ones: mixture.py, "Members")."""
    members = params.get("members", MIX_MEMBERS) if algorithm.name == "mix" else MIX_MEMBERS
    if members < MIX_MEMBERS:
        return algorithm.slots[:3 * int(members)]
    return algorithm.slots


def get(name: str) -> Algorithm:
    """The registered algorithm (or a LEGACY one), or ParameterError naming the ones there are."""
    try:
        return KNOWN[name]
    except (KeyError, TypeError):
        raise ParameterError(f"unknown algorithm {name!r} (olcli has: {', '.join(ALGORITHMS)})") from None
