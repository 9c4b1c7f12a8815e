"""The options of a contextual-bandit line (``olcli vw``'s VW spellings, and ``olcli train``'s own turned
into them, ``train_arguments``): which are taken (``OPTIONS``), their checks (``parse``, ``number``), the
reduction's settings they make (``cb_settings``) and VW's gd rules for the base learner (``gd_params``).
The run that uses them is ``olcli/cb_run.py``."""

import math
import sys

from olcli import vw
from olcli.errors import UsageError

# VW option -> (its key here, takes a value). Spellings of one option share the key.
OPTIONS = {
    "--cb_explore_adf": ("cb_explore_adf", False), "--cb_adf": ("cb_adf", False), "--cb": ("cb", True),
    "--cb_type": ("cb_type", True), "--epsilon": ("epsilon", True), "--first": ("first", True),
    "--bag": ("bag", True), "--softmax": ("softmax", False), "--lambda": ("lambda", True),
    "--squarecb": ("squarecb", False), "--gamma_scale": ("gamma_scale", True),
    "--gamma_exponent": ("gamma_exponent", True), "--first_only": ("first_only", False),
    "--greedify": ("greedify", False),
    "--data": ("data", True), "-d": ("data", True),
    "--predictions": ("predictions", True), "-p": ("predictions", True),
    "--final_regressor": ("final", True), "-f": ("final", True),
    "--initial_regressor": ("initial", True), "-i": ("initial", True),
    "--testonly": ("testonly", False), "-t": ("testonly", False),
    "--bit_precision": ("bits", True), "-b": ("bits", True),
    "--learning_rate": ("eta", True), "-l": ("eta", True),
    "--power_t": ("power_t", True), "--initial_t": ("initial_t", True),
    "--l1": ("l1", True), "--l2": ("l2", True),
    "--coin": ("coin", False), "--ftrl": ("ftrl", False), "--ftrl_alpha": ("ftrl_alpha", True),
    "--ftrl_beta": ("ftrl_beta", True),
    "--sgd": ("sgd", False), "--adaptive": ("adaptive", False), "--normalized": ("normalized", False),
    "--invariant": ("invariant", False),
    "--noconstant": ("noconstant", False), "--hash": ("hash", True),
    "--loss_function": ("loss", True),
    "--quadratic": ("interactions", True), "-q": ("interactions", True), "--cubic": ("interactions", True),
    "--interactions": ("interactions", True), "--ngram": ("ngram", True), "--skips": ("skips", True),
    "--random_seed": ("random_seed", True),
    "--quiet": ("quiet", False), "--predict_only_model": ("weights_only", False),
    "--strict_parse": ("strict", False),
    # accepted, nothing to do: the CB run reads its text input each time (no example cache is written),
    # keeps the optimizer state in every model, and its results do not depend on threads or the table kind
    "--cache": ("cache", False), "-c": ("cache", False), "--kill_cache": ("cache", False), "-k": ("cache", False),
    "--cache_file": ("cache_file", True), "--save_resume": ("noop", False), "--onethread": ("noop", False),
    "--sparse_weights": ("noop", False), "--holdout_off": ("holdout_off", False),
    "--dsjson": ("dsjson", False), "--rank_all": ("rank_all", False), "--passes": ("passes", True),
    "--cbify": ("cbify", True), "--loss0": ("loss0", True), "--loss1": ("loss1", True),
    "--flip_loss_sign": ("flip_loss_sign", False), "--eval": ("eval", False), "--report": ("report", True),
    "--progress": ("progress", True), "-P": ("progress", True),
}
CB_TYPES = ("mtr", "ips", "dm", "dr")
RULE_FLAGS = ("epsilon", "first", "bag", "softmax", "squarecb")

# What to say about options olcli vw takes on other lines but not (yet) on a CB line.
NOT_ON_CB = {"--audit": None, "--invert_hash": None, "--readable_model": None}


def parse(args) -> tuple:
    """A VW CB command line -> (options by key, data files). Options olcli lacks are refused, all named."""
    given, data, refused = {}, [], []
    i = 0
    args = list(args)
    while i < len(args):
        token = args[i]
        if token == "--":
            data.extend(args[i + 1:])
            break
        if not vw.is_option(token):
            data.append(token)
            i += 1
            continue
        name, attached = vw._split(token)
        if name in OPTIONS:
            key, takes = OPTIONS[name]
            if takes:
                value, i = vw._take_value(name, attached, args, i)
            else:
                if attached is not None and not name.startswith("--"):   # a cluster of short flags (-kc)
                    args = args[:i + 1] + ["-" + attached] + args[i + 1:]
                elif attached is not None:
                    raise UsageError(f"{name} takes no value (given {attached!r})")
                value, i = True, i + 1
            if key == "data":
                data.append(value)
            elif key == "noop":
                pass
            elif key in ("interactions", "ngram", "skips"):
                given.setdefault(key, (name, []))[1].append(value)
            else:
                given.setdefault(key, (name, value))
            continue
        refused.append(name)
        option = vw.BY_NAME.get(name)
        i += 1 if option is None or not option.value or attached is not None else 2
    if refused:
        first = refused[0]
        if first in NOT_ON_CB or first in vw.BY_NAME:
            why = NOT_ON_CB.get(first) or "olcli vw takes it on other lines"
            also = [n for n in dict.fromkeys(refused[1:]) if n != first]
            raise UsageError(f"{first}: not supported on a contextual-bandit line yet ({why})"
                             + (f" (also not supported: {', '.join(also)})" if also else ""))
        raise vw.refusal(refused)
    return given, data


def with_model_reduction(args) -> list:
    """``args`` with the reduction of the model that ``-i``/``--initial_regressor`` names added when the line
    enables none and the model is an olcli contextual-bandit model (VW reads a model's reductions from the
    model: ``vw -d x -t -i cb.model`` tests a ``--cb 2`` model as ``--cb 2``); else ``args`` as given."""
    args = list(args)
    path = None
    for k, token in enumerate(args):
        if token in ("-i", "--initial_regressor") and k + 1 < len(args):
            path = args[k + 1]
        elif token.startswith("--initial_regressor="):
            path = token.split("=", 1)[1]
    if path is None or vw.is_cb_line(args):
        return args
    from olcli.model import peek_header

    stored = (peek_header(path) or {}).get("cb")
    settings = stored.get("settings") if isinstance(stored, dict) else None
    if not isinstance(settings, dict):
        return args
    reduction, actions = settings.get("reduction"), settings.get("actions")
    if reduction in ("cb", "cbify") and isinstance(actions, int) and actions > 0:
        return args + [f"--{reduction}", str(actions)]
    if reduction in ("cb_adf", "cb_explore_adf"):
        return args + [f"--{reduction}"]
    return args


def number(given, key, kind=float, default=None, low=None):
    if key not in given:
        return default
    name, value = given[key]
    try:
        number = kind(value)
    except ValueError:
        raise UsageError(f"{name} {value}: expected {'a whole number' if kind is int else 'a number'}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise UsageError(f"{name} {value}: expected a finite number")
    if low is not None and number < low:
        raise UsageError(f"{name} {value}: must be at least {low}")
    return number


def cb_settings(given) -> dict:
    """The reduction's settings from the line (VW's defaults per rule)."""
    reduction = ("cbify" if "cbify" in given else "cb_explore_adf" if "cb_explore_adf" in given
                 else "cb_adf" if "cb_adf" in given else "cb")
    rules = [r for r in RULE_FLAGS if r in given and r != "epsilon"]
    if reduction == "cbify" and ("cb_adf" in given or "cb" in given):
        other = given["cb_adf" if "cb_adf" in given else "cb"][0]
        raise UsageError(f"--cbify with {other}: --cbify makes its own bandit (with --cb_explore_adf or alone)")
    if ("loss0" in given or "loss1" in given or "flip_loss_sign" in given) and reduction != "cbify":
        name = given[next(k for k in ("loss0", "loss1", "flip_loss_sign") if k in given)][0]
        raise UsageError(f"{name}: an option of --cbify")
    evaluating = "eval" in given
    if evaluating and (reduction != "cb" or rules or "epsilon" in given):
        raise UsageError("--eval: olcli evaluates --cb K logs only (VW's legacy --cb --eval), without exploration")
    odd = [given[k][0] for k in ("dsjson", "rank_all") if k in given and (reduction == "cbify" or evaluating)]
    if odd:
        raise UsageError(f"{odd[0]} with {'--cbify' if reduction == 'cbify' else '--eval'}: not supported (the input "
                         "is single text lines, the output one action per line)")
    if reduction in ("cb", "cbify") and "interactions" in given:
        raise UsageError(f"{given['interactions'][0]} with --{reduction} K: not supported yet (the crosses of features VW's "
                         "per-action placement collapses are counted differently)")
    if reduction not in ("cb_explore_adf", "cbify"):
        extra = [given[r][0] for r in RULE_FLAGS + ("lambda", "gamma_scale", "gamma_exponent", "first_only", "greedify")
                 if r in given]
        if extra:
            raise UsageError(f"{extra[0]}: an exploration option; it needs --cb_explore_adf (--cb_adf only ranks)")
    if len(rules) > 1:
        raise UsageError(f"{given[rules[0]][0]} and {given[rules[1]][0]}: one exploration rule at a time "
                         "(olcli has no combined rules)")
    rule = rules[0] if rules else "epsilon"
    cb_type = given["cb_type"][1] if "cb_type" in given else "mtr"   # VW 9's default (--cb K too: cb_to_cb_adf)
    if evaluating:
        cb_type = given["cb_type"][1] if "cb_type" in given else "dr"   # VW's legacy cb_algs: dr
        if cb_type == "dm":
            raise UsageError("--cb_type dm with --eval: the direct method can not be used for evaluation (it is "
                             "biased; VW refuses it too); use dr or ips")
        if cb_type in ("mtr", "sm"):
            sys.stderr.write(f"warning: --cb_type {cb_type} with --eval: VW's evaluation takes ips, dm or dr; "
                             "resetting to dr, as VW does\n")
            cb_type = "dr"
    if cb_type not in CB_TYPES:
        raise UsageError(f"--cb_type {cb_type}: not supported; olcli's cb_types: {', '.join(CB_TYPES)}")
    if reduction in ("cb", "cbify"):
        k, bits = number(given, reduction, int, 0, low=1), number(given, "bits", int, 18, low=1)
        if k > 1 << min(bits, 62):   # each action's weight copies sit at their own offset in the table
            raise UsageError(f"{given[reduction][0]} {given[reduction][1]}: more actions than the 2^{bits}-entry "
                             f"weight table has places for their copies; give at most {1 << bits} actions or a "
                             "larger -b")
    if rule == "squarecb" and cb_type != "mtr":
        raise UsageError(f"--squarecb learns with --cb_type mtr only (given {cb_type})")
    return {
        "reduction": reduction, "rule": rule if reduction in ("cb_explore_adf", "cbify") else None,
        "cb_type": cb_type, "eval": evaluating,
        "loss0": number(given, "loss0", default=0.0), "loss1": number(given, "loss1", default=1.0),
        "flip_loss_sign": "flip_loss_sign" in given,
        "epsilon": number(given, "epsilon", default=None, low=0.0),
        "first": number(given, "first", int, 0, low=1) if rule == "first" else 0,
        "bag": number(given, "bag", int, 0, low=1) if rule == "bag" else 0,
        "lambda": number(given, "lambda", default=1.0),
        "gamma_scale": number(given, "gamma_scale", default=10.0, low=0.0),
        "gamma_exponent": number(given, "gamma_exponent", default=0.5, low=0.0),
        "first_only": "first_only" in given, "greedify": "greedify" in given,
        "random_seed": number(given, "random_seed", int, 0),
        "actions": number(given, reduction, int, 0, low=1) if reduction in ("cb", "cbify") else 0,
        # dr and bag keep weight copies: each gets its own constant feature (the learner's is off); --cb K and
        # --cbify place copies at index offsets instead, each with its own constant (cb.CbExploreAdf._place)
        "copy_constants": "noconstant" not in given and reduction in ("cb_explore_adf", "cb_adf") and (
            cb_type == "dr" or rule == "bag" and reduction != "cb_adf"),
    }


def gd_params(given) -> dict:
    """VW's gd rules (gd.cc): no switch named -> adaptive, normalized, invariant; otherwise exactly the
    named ones (--sgd: none); -l 0.5 with adaptive and normalized, else 10; plain SGD starts at initial_t 1."""
    switches = ("adaptive", "normalized", "invariant")
    named = [s for s in switches if s in given]
    if "sgd" in given and named:
        raise UsageError(f"--sgd and {given[named[0]][0]}: --sgd is VW's plain update (all three off)")
    on = {s: 1.0 if (not named and "sgd" not in given or s in named) else 0.0 for s in switches}
    eta = number(given, "eta", default=0.5 if on["adaptive"] and on["normalized"] else 10.0)
    initial_t = number(given, "initial_t", default=1.0 if not on["adaptive"] and not on["normalized"] else 0.0)
    return dict(eta=eta, power_t=number(given, "power_t", default=0.5), initial_t=initial_t,
                l1=number(given, "l1", default=0.0, low=0.0), l2=number(given, "l2", default=0.0, low=0.0), **on)


LEARNER_KEYS = ("bits", "eta", "power_t", "initial_t", "l1", "l2", "adaptive", "normalized", "invariant",
                "noconstant", "hash", "loss")
CB_KEYS = ("cb_type", "epsilon", "first", "bag", "softmax", "lambda", "squarecb", "gamma_scale",
           "gamma_exponent", "first_only", "greedify", "random_seed")


def interactions_of(given) -> tuple:
    """-q/--quadratic/--cubic/--interactions values as the Learner's interaction specs (VW's ':' is any
    namespace, which the engine expands as VW does)."""
    return tuple(given.get("interactions", (None, []))[1])


# olcli train's own spellings on a CB line -> the VW spellings above
TRAIN_SPELLINGS = {"--final-model": "-f", "--initial-model": "-i", "--bits": "-b", "--learning-rate": "-l",
                   "--power-t": "--power_t", "--initial-t": "--initial_t", "--kill-cache": "-k",
                   "--holdout-off": "--holdout_off", "--format": None}


def train_arguments(args) -> tuple:
    """``olcli train`` arguments of a CB run -> (VW-spelled arguments, the algorithm flag or None).

    olcli's spellings (``--cb-explore-adf``, ``--final-model``, ``--learning-rate``...) become VW's; an
    algorithm flag (``--gd``, ``--ftrl``, ``--mix``...) chooses the base learner (olcli's default
    otherwise); positional words are data files."""
    from olcli.engine import registry

    out, algorithm = [], None
    for token in args:
        if not vw.is_option(token) or not token.startswith("--"):
            out.append(token)
            continue
        name, equals, value = token.partition("=")
        if name[2:] in registry.ALGORITHMS:
            if algorithm is not None and algorithm != name[2:]:
                raise UsageError(f"--{algorithm} and {name}: one algorithm at a time")
            algorithm = name[2:]
            continue
        if name in TRAIN_SPELLINGS:
            if TRAIN_SPELLINGS[name] is None:
                raise UsageError(f"{name}: not supported on a contextual-bandit line (the input is ADF text or "
                                 "--dsjson)")
            name = TRAIN_SPELLINGS[name]
        elif name not in OPTIONS and "--" + name[2:].replace("-", "_") in OPTIONS:
            name = "--" + name[2:].replace("-", "_")
        out.append(name + equals + value)
    return out, algorithm
