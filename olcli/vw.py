"""VW's command line in olcli: VW's spellings under ``train``/``test``, and ``olcli vw``.

Two uses of one table (``VW_OPTIONS``):

* ``rewrite`` turns VW's spellings given to ``olcli train``/``olcli test``
  (``-d FILE``, ``--final_regressor=m``, ``--loss_function logistic``, ``-qab``,
  ``-P 10``...) into olcli's own before the command's options are parsed; olcli's
  own spellings pass through unchanged and win where the two differ
  (``--cache PATH`` is olcli's; ``--cache`` with no path after it, or ``-c``, is VW's
  cache flag; ``--progress`` without a
  number is olcli's bar, ``--progress 10`` is VW's interval).
* ``translate`` takes a whole VW command line (``olcli vw ARGS...``) and gives
  the ``olcli train`` arguments that run it: VW's default learner (``--gd``) unless
  another is chosen, VW's default hashing (``--hash strings``: a name of digits
  only is its number plus the namespace's hash) unless ``--hash all`` or a model
  (``-i``) says otherwise, ``-t`` for test mode. A VW option
  olcli does not have is refused by name with what olcli offers instead (exit 2);
  nothing is silently ignored.

VW parses its command line with boost::program_options: long options take
``--opt value`` or ``--opt=value``, short ones ``-q ab`` or ``-qab``; prefixes of
long names are not accepted (``--quadr`` is an error); words that are not options
are data files. Both forms are accepted here, for VW's spellings and olcli's.

No heavy imports: this module is imported while ``olcli train`` parses its options.
"""

import os
import re
from olcli.errors import UsageError
from olcli.records import Frozen
from olcli.settings import MODEL_SETTINGS, RUN_SETTINGS

DATA = "DATA"  # the target of -d/--data: a data file, olcli's positional argument


class VWOption(Frozen):
    """One VW option olcli accepts."""
    __slots__ = _fields = ("names", "value", "target", "note")

    def __init__(
            self,
            names: tuple,        # VW's spellings, long first ("--data", "-d")
            value: bool,         # takes a value
            target: str,         # olcli's spelling (DATA: positional data); "" = accepted, nothing to do
            note: str = "",      # what olcli does with it, for `olcli vw --help` and docs/vw.md
    ):
        setter = object.__setattr__
        setter(self, "names", names)
        setter(self, "value", value)
        setter(self, "target", target)
        setter(self, "note", note)


# Every VW option olcli accepts. The target must be an option of the command it is
# given to (train, or test for the few that apply there); a target this olcli does
# not have (yet) makes the VW option refused by name.
VW_OPTIONS = [
    VWOption(("--data", "-d"), True, DATA, "data file (also positional)"),
    VWOption(("--final_regressor", "-f"), True, "--final-model"),
    VWOption(("--initial_regressor", "-i"), True, "--initial-model"),
    VWOption(("--predictions", "-p"), True, "--predictions"),
    VWOption(("--testonly", "-t"), False, "--testonly", "test mode: predict and score, learn nothing"),
    VWOption(("--learning_rate", "-l"), True, "--learning-rate"),
    VWOption(("--power_t",), True, "--power-t"),
    VWOption(("--initial_t",), True, "--initial-t"),
    VWOption(("--cache", "-c"), False, "--vw-cache", "example cache beside the data (DATA.olcache)"),
    VWOption(("--holdout_off",), False, "--holdout-off"),
    VWOption(("--cubic",), True, "--cubic"),
    VWOption(("--interactions",), True, "--interactions"),
    VWOption(("--l1",), True, "--l1"),
    VWOption(("--l2",), True, "--l2"),
    VWOption(("--ftrl",), False, "--ftrl"),
    VWOption(("--coin",), False, "--coin"),
    VWOption(("--ftrl_alpha",), True, "", "-l with --ftrl, --coin-alpha with --coin"),
    VWOption(("--ftrl_beta",), True, "", "--ftrl-beta with --ftrl, --coin-beta with --coin"),
    VWOption(("--adaptive",), False, "--adaptive"),
    VWOption(("--normalized",), False, "--normalized"),
    VWOption(("--invariant",), False, "--invariant"),
    VWOption(("--probabilities",), False, "--probabilities"),
    VWOption(("--readable_model",), True, "--readable-model"),
    VWOption(("--invert_hash",), True, "--invert-hash"),
    VWOption(("--audit", "-a"), False, "--audit"),
    VWOption(("--quiet",), False, "--quiet"),
    VWOption(("--strict_parse",), False, "--strict"),
    VWOption(("--save_resume",), False, "", "accepted: olcli's models always keep the optimizer state"),
    VWOption(("--random_seed",), True, "", "accepted: olcli's linear learners draw no random numbers"),
    VWOption(("--sparse_weights",), False, "--sparse-weights", "accepted with a note: the table is dense by design"),
    VWOption(("--onethread",), False, "", "accepted: olcli's parsing threads do not change any result"),
    VWOption(("--no_stdin",), False, "", "without data files, read no data (not standard input), as VW"),
] + [VWOption(setting.vw, not setting.switch, setting.flags[-1], setting.help)
     for setting in MODEL_SETTINGS + RUN_SETTINGS if setting.vw]   # the settings' VW spellings (olcli/settings.py)

BY_NAME = {name: option for option in VW_OPTIONS for name in option.names}

# olcli's own options that olcli vw takes too: they have no VW meaning to clash with.
OLCLI_EXTRAS = [VWOption(("--report",), True, "--report", "olcli's JSON report (olcli plot draws it)")]
EXTRAS = {name: option for option in OLCLI_EXTRAS for name in option.names}

# Where olcli's spelling of a VW option differs in meaning, olcli's own wins under
# train/test (VW's is reachable by its other name): VW's --cache is a flag (-c),
# olcli's --cache takes the cache's path (VW's --cache_file).
OLCLI_FIRST = {"--cache"}

_NO_SUCH = "olcli learns linear models online"
_LEARNERS = "olcli's learners are --gd (VW's default), --ftrl and --coin (olcli train has more)"
_MULTICLASS = "olcli's multiclass learner is --oaa K (olcli train also has --softmax K)"
_BANDITS = ("olcli vw runs --cb_explore_adf (--epsilon, --first, --bag, --softmax, --squarecb), --cbify K, "
            "--cb K (also --eval) and --cb_adf with "
            "--cb_type ips/dr/dm/mtr; not this option")
_FORMATS = "olcli reads VW's text format and libsvm (plain, .gz, .bz2)"
_NONLINEAR = "olcli learns linear models only; feature crosses: -q/--cubic/--interactions"

# What olcli offers instead of the VW options it does not have; any other option
# is refused with the generic advice.
REFUSED = {
    "--bfgs": "olcli learns online only", "--conjugate_gradient": "olcli learns online only",
    "--mem": "a --bfgs option; olcli learns online only", "--termination": "a --bfgs option; olcli learns online only",
    "--hessian_on": "a --bfgs option; olcli learns online only",
    "--pistol": _LEARNERS + "; --coin is VW's other parameter-free learner",
    "--freegrad": _LEARNERS + "; --coin is VW's other parameter-free learner",
    "--OjaNewton": _LEARNERS, "--svrg": _LEARNERS, "--sgd": "VW's plain SGD; olcli vw has --gd with "
    "--adaptive/--normalized/--invariant (olcli train --sgd is olcli's own SGD, with other defaults)",
    "--adax": _LEARNERS, "--sparse_l2": _LEARNERS, "--l1_state": _LEARNERS, "--l2_state": _LEARNERS,
    "--decay_learning_rate": "olcli keeps the learning rate between passes (VW's 1)",
    "--nn": _NONLINEAR, "--ksvm": _NONLINEAR, "--lrq": _NONLINEAR, "--lrqfa": _NONLINEAR,
    "--stage_poly": _NONLINEAR, "--autolink": _NONLINEAR, "--rank": _NONLINEAR, "--new_mf": _NONLINEAR,
    "--boosting": _NONLINEAR, "--bootstrap": _NONLINEAR, "--lda": "olcli has no topic models",
    "--binary": "olcli reports accuracy (and AUC) for -1/+1 labels beside the loss; -p gives raw scores",
    "--oaa_subsample": _MULTICLASS, "--csoaa": _MULTICLASS, "--csoaa_ldf": _MULTICLASS, "--wap_ldf": _MULTICLASS,
    "--ect": _MULTICLASS, "--log_multi": _MULTICLASS, "--recall_tree": _MULTICLASS, "--plt": _MULTICLASS,
    "--multilabel_oaa": _MULTICLASS, "--memory_tree": _MULTICLASS, "--emt": _MULTICLASS,
    "--named_labels": _MULTICLASS + " with labels 1..K", "--classweight": _MULTICLASS,
    "--scores": _MULTICLASS,
    "--dsjson": _FORMATS, "--json": _FORMATS, "--csv": _FORMATS, "--flatbuffer": _FORMATS,
    "--daemon": "olcli serve -i MODEL serves VW's daemon line protocol", "--port": "olcli serve --port",
    "--raw_predictions": "-p writes the raw score unless --link/--probabilities", "-r": "-p writes the raw score "
    "unless --link/--probabilities",
    "--examples": "olcli reads every example (head -n N DATA | olcli vw ... reads the first N)",
    "--expectile_q": "olcli's losses: squared, logistic, hinge, quantile (and absolute)",
    "--dont_output_best_constant": "olcli always prints the best constant",
    "--search": "olcli has no learning-to-search", "--active": _NO_SUCH, "--automl": _NO_SUCH,
    "--random_weights": "olcli's weights start at 0 (or --initial_weight)",
    "--normal_weights": "olcli's weights start at 0 (or --initial_weight)",
    "--truncated_normal_weights": "olcli's weights start at 0 (or --initial_weight)",
    "--feature_mask": _NO_SUCH, "--audit_regressor": "olcli inspect MODEL --invert-hash DATA prints the "
    "model with the feature names", "--save_per_pass": "olcli writes -f once, at the end (atomically)",
    "--affix": _NO_SUCH, "--spelling": _NO_SUCH, "--dictionary": _NO_SUCH, "--redefine": _NO_SUCH,
    "--feature_limit": _NO_SUCH, "--sort_features": _NO_SUCH,
}
_BANDIT_PREFIXES = ("--cb", "--ccb", "--cats", "--slates", "--warm_cb", "--explore_eval", "--squarecb",
                    "--large_action", "--experimental_igl", "--epsilon", "--cover", "--bag", "--first",
                    "--softmax", "--regcb", "--rnd", "--synthcover", "--sample_pdf", "--get_pmf",
                    "--pmf_to_pdf", "--cbzo", "--eval")


# the contextual-bandit lines olcli vw runs (olcli/cb_run.py)
CB_FAMILY = ("--cb_explore_adf", "--cb_adf", "--cb", "--cbify")


def is_cb_line(args) -> bool:
    """Does this command line enable --cb_explore_adf, --cb_adf or --cb (also spelled --cb-explore-adf...)?"""
    return any(_cb_name(_split(token)[0]) in CB_FAMILY for token in args if is_option(token))


def _cb_name(name: str) -> str:
    return "--" + name[2:].replace("-", "_") if name.startswith("--") else name   # olcli's --cb-adf too


def advice(name: str) -> str:
    """What to say about a VW option olcli does not have."""
    if name in REFUSED:
        return REFUSED[name]
    if name.startswith(_BANDIT_PREFIXES):
        return _BANDITS
    if name.startswith("--search"):
        return "olcli has no learning-to-search"
    if name.startswith("--lda"):
        return "olcli has no topic models"
    return f"{_NO_SUCH}; `olcli vw --help` lists the VW options it takes"


def refusal(names: list) -> UsageError:
    first = names[0]
    also = [name for name in names[1:] if name != first]
    message = f"{first}: not supported; {advice(first)}"
    if also:
        message += " (also not supported: " + ", ".join(dict.fromkeys(also)) + ")"
    return UsageError(message)


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _split(token: str):
    """'--name=value' -> ('--name', 'value'); '-qab' -> ('-q', 'ab'); else (token, None)."""
    if token.startswith("--"):
        name, equals, value = token.partition("=")
        return name, (value if equals else None)
    return token[:2], (token[2:] or None)


def is_option(token: str) -> bool:
    return token.startswith("-") and token not in ("-", "--") and not _NUMBER.match(token)


class Known(Frozen):
    """A command's own options: spelling -> takes a value; and the allowed values of
    those that have a fixed set (spelling -> list)."""
    __slots__ = _fields = ("options", "choices")

    def __init__(self, options: dict, choices: dict | None = None):
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "choices", {} if choices is None else choices)

    def has(self, name: str) -> bool:
        return name in self.options


def _take_value(name, attached, args, i):
    """The value of option ``name`` at args[i]: attached, or the next word. Returns
    (value, next index)."""
    if attached is not None:
        return attached, i + 1
    if i + 1 >= len(args):
        raise UsageError(f"{name} needs a value")
    return args[i + 1], i + 2


def rewrite(args: list, known: Known, command: str) -> list:
    """VW's spellings in ``olcli train``/``olcli test`` arguments -> olcli's own.

    olcli's own options (and their values) pass through untouched; so do words that
    are neither (click reports unknown ones). A VW option olcli does not have is
    refused by name."""
    out = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i:])
            break
        if not is_option(token):
            out.append(token)
            i += 1
            continue
        name, attached = _split(token)
        if name == "--progress" and attached is None and (i + 1 >= len(args) or not _NUMBER.match(args[i + 1])):
            out.append(token)  # olcli's --progress (a bar); VW's takes a number
            i += 1
            continue
        if name == "--cache" and attached is None and (i + 1 >= len(args) or is_option(args[i + 1])) \
                and known.has("--vw-cache"):
            out.append("--vw-cache")  # no path after it: VW's cache flag (-c), as VW's lines spell it
            i += 1
            continue
        if name != "--progress" and (known.has(name) or name in OLCLI_FIRST):
            takes = known.options.get(name, True)
            if not takes and attached is not None and not token.startswith("--"):
                # a cluster of short flags (-kc): the first, then the rest as their own word
                out.append(name)
                args = args[:i + 1] + ["-" + attached] + args[i + 1:]
                i += 1
                continue
            out.append(token)
            i += 1
            if takes and attached is None and i < len(args):
                out.append(args[i])
                i += 1
            continue
        option = BY_NAME.get(name)
        if option is None:
            if name.startswith("--") and name.replace("_", "-") != name and known.has(name.replace("_", "-")):
                option = VWOption((name,), known.options[name.replace("_", "-")], name.replace("_", "-"))
            elif name in REFUSED or name.startswith(_BANDIT_PREFIXES + ("--search", "--lda")):
                raise refusal([name])
            else:
                out.append(token)  # not VW's either: the command's parser says what is wrong
                i += 1
                continue
        words, i = _vw_words(option, name, attached, args, i, known, command)
        out.extend(words)
    return out


def _vw_words(option: VWOption, name: str, attached, args: list, i: int, known: Known, command: str):
    """olcli's words for the VW option at args[i]; returns (words, next index)."""
    if option.value:
        value, i = _take_value(name, attached, args, i)
    else:
        if attached is not None and not name.startswith("--"):
            # -kt: a cluster of short VW flags
            return _vw_words(option, name, None, args[:i] + [name, "-" + attached] + args[i + 1:], i, known,
                             command)
        if attached is not None:
            raise UsageError(f"{name} takes no value (given {attached!r})")
        value, i = None, i + 1
    target = option.target
    if target == DATA:
        return [value], i
    if name == "--hash" and value not in ("strings", "all"):
        raise UsageError(f"--hash {value}: VW's values are 'strings' and 'all'")
    if name in ("--ftrl_alpha", "--ftrl_beta"):
        target = _ftrl_target(name, args)
    if not target:
        return [], i
    if not known.has(target):
        if command == "test" and target not in _NOT_YET:
            raise UsageError(f"{name}: not an option of olcli test (it is about learning; olcli train takes it)")
        raise UsageError(f"{name}: not supported; this olcli does not have it yet")
    if option.value and target in known.choices and value not in known.choices[target]:
        raise UsageError(f"{name} {value}: not supported; olcli's choices: {', '.join(known.choices[target])}")
    return [target] + ([value] if option.value else []), i


# Targets olcli may not have yet (built by other work on the same issue).
_NOT_YET = {"--ngram", "--skips", "--hash-seed", "--permutations", "--leave-duplicate-interactions",
            "--initial-weight", "--predict-only-model", "--indexing"}


def _ftrl_target(name: str, args: list) -> str:
    words = {_split(token)[0] for token in args if is_option(token)}
    if "--coin" in words:
        return "--coin-alpha" if name == "--ftrl_alpha" else "--coin-beta"
    if "--ftrl" in words:
        return "--learning-rate" if name == "--ftrl_alpha" else "--ftrl-beta"
    raise UsageError(f"{name} applies to --ftrl (olcli: {'-l' if name == '--ftrl_alpha' else '--ftrl-beta'}) "
                     f"or --coin (olcli: {'--coin-alpha' if name == '--ftrl_alpha' else '--coin-beta'})")


# Options that choose the learner; without either, olcli vw uses VW's default learner,
# named (--gd: olcli train's default is --mix, which gives way to --gd only for the options
# it cannot honour, with a note VW would not print). VW's --ftrl and --coin defaults
# (alpha 0.5, beta 1; alpha 4, beta 1) are olcli's.
_ALGORITHMS = {"--ftrl", "--coin"}


def translate(args: list, known: Known) -> list:
    """A whole VW command line -> the ``olcli train`` arguments that run it.

    Every word must be VW's: an option in VW_OPTIONS (or its value) or a data file.
    Options olcli does not have are all collected and refused together, by name."""
    unsupported = []
    i = 0
    data = False  # a positional word: a data file
    words = []  # (name, attached) of every option, to see what was given
    while i < len(args):
        token = args[i]
        if token == "--" or not is_option(token):
            data = data or token != "--"
            i += 1
            continue
        name, attached = _split(token)
        option = BY_NAME.get(name) or EXTRAS.get(name)
        if option is None:
            unsupported.append(name)
            i += 1
            continue
        words.append(name)
        if option.value and attached is None:
            i += 1
        elif not option.value and attached is not None and not name.startswith("--"):
            args = args[:i] + [name, "-" + attached] + args[i + 1:]  # a cluster of short flags (-kc)
        i += 1
    if unsupported:
        raise refusal(unsupported)
    given = {(BY_NAME.get(name) or EXTRAS[name]).names[0] for name in words}
    out = _translate_words(args, known)
    if "--no_stdin" in given and not data and "--data" not in given:
        out.append(os.devnull)  # VW reads nothing; olcli would read standard input
    if "--initial_regressor" not in given and not given & _ALGORITHMS:
        out.append("--gd")  # VW's default learner (-t without -i too: it tests VW's default model, weights 0)
    if "--initial_regressor" not in given and "--hash" not in given:
        out.extend(["--hash", "strings"])  # VW's default hashing (olcli train's too, said here); -i: the model's
    out.append("--vw-header")  # VW's lines before the table
    return out


def _translate_words(args: list, known: Known) -> list:
    """Each VW option -> olcli's words; other words are data files."""
    out = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            out.extend(args[i + 1:])
            break
        if not is_option(token):
            out.append(token)
            i += 1
            continue
        name, attached = _split(token)
        words, i = _vw_words(BY_NAME.get(name) or EXTRAS[name], name, attached, args, i, known, "train")
        out.extend(words)
    return out


def progress_spacing(value: str) -> tuple:
    """VW's -P/--progress value -> (factor, step): an integer N (no '.') is a row every N
    of example weight (at least 1), a number with a '.' a row each time the weight
    grows by that factor (a factor <= 1 gets 1 added, as VW's parse_args)."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if number != number or number in (float("inf"), float("-inf")):
        raise UsageError(f"-P/--progress {value!r}: expected a number (VW's progress interval)")
    if "." not in value:
        return 2.0, max(1.0, float(int(number)))
    return (number + 1.0 if number <= 1.0 else number), 0.0


def summary() -> str:
    """The VW options olcli takes, compactly (``olcli vw --help``)."""
    return "VW options taken: " + " ".join("/".join(reversed(option.names)) for option in VW_OPTIONS) + "."


def _g(x: float) -> str:
    """A number as VW's C++ streams print a float (6 significant digits)."""
    return f"{float(x):g}"


def header(model, *, sources, final_model=None, predictions=None, cache_path=None, cache_exists=False,
           kill_cache=False, passes=1, testing=False, probabilities=False, link=None, l1=0.0, l2=0.0) -> str:
    """VW 9's lines on stderr before the progress table, for the run ``olcli vw`` is about to
    make with ``model`` (read from VW's reference stderr files of its linear learners: the
    feature options, regularization, test mode, outputs, the learner's settings, the cache
    and data, then the reductions and label types). olcli's cache file is named as olcli
    names it (DATA.olcache); a model continued with -i shows its own settings."""
    lines = []
    specs = list(model.interactions)
    if specs:
        if all(len(spec) == 2 for spec in specs):
            lines.append("creating quadratic features for pairs: " + " ".join(specs))
        elif all(len(spec) == 3 for spec in specs):
            lines.append("creating cubic features for triples: " + " ".join(specs))
        else:
            lines.append("creating features for following interactions: " + " ".join(specs))
    if model.ignore:
        lines.append("ignoring namespaces beginning with: " + " ".join(model.ignore))
    if model.keep:
        lines.append("using namespaces beginning with: " + " ".join(model.keep))
    if model.ignore_linear:
        lines.append("ignoring linear terms for namespaces beginning with: " + " ".join(model.ignore_linear))
    if testing:
        lines.append("only testing")
    params = model.params
    l1 = params.get("l1", l1) or 0.0
    l2 = params.get("l2", l2) or 0.0
    if l1 > 0:
        lines.append(f"using l1 regularization = {_g(l1)}")
    if l2 > 0:
        lines.append(f"using l2 regularization = {_g(l2)}")
    if final_model:
        lines.append(f"final_regressor = {final_model}")
    if predictions:
        lines.append(f"predictions = {predictions}")
    if model.algorithm in ("ftrl", "coin"):
        lines += ["Enabling FTRL based optimization",
                  "Algorithm used: " + ("Proximal-FTRL" if model.algorithm == "ftrl" else "Coin Betting"),
                  f"ftrl_alpha = {_g(params['alpha'])}", f"ftrl_beta = {_g(params['beta'])}"]
    if cache_path:
        lines.append(f"{'using' if cache_exists and not kill_cache else 'creating'} cache_file = {cache_path}")
    else:
        lines.append("using no cache")
    names = [source for source in sources if source != "-"]
    lines += [f"Reading datafile = {names[0] if names else ''}", f"num sources = {max(1, len(sources))}",
              f"Num weight bits = {model.bits}"]
    eta, power_t, initial_t = 0.5, 0.5, 0.0
    if model.algorithm in ("gd", "sgd"):
        eta, power_t, initial_t = params["eta"], params["power_t"], params["initial_t"]
    from olcli.engine.records import C_WEIGHT

    seen = float(model.counters[C_WEIGHT])  # a continued model's t (VW saves it)
    if testing:
        initial_t += seen
    elif initial_t > 0:
        eta *= initial_t ** power_t  # VW prints the rate its first update uses
        initial_t += seen
    else:
        initial_t += seen
    lines += [f"learning rate = {_g(eta)}", f"initial_t = {_g(initial_t)}", f"power_t = {_g(power_t)}"]
    if passes > 1:
        lines.append("decay_learning_rate = 1")
    base = {"ftrl": "ftrl-Proximal-FTRL", "coin": "ftrl-Coin Betting"}.get(model.algorithm, "gd")
    learners = [base] + (["generate_interactions"] if specs and any(":" in spec for spec in specs) else [])
    link = link or model.link
    learners.append(f"scorer-{'identity' if link in (None, 'identity') else link}")
    if model.classes:
        learners.append("oaa-prob" if probabilities else "oaa")
    else:
        learners.append("count_label")
    lines.append("Enabled learners: " + ", ".join(learners))
    lines.append(f"Input label = {'MULTICLASS' if model.classes else 'SIMPLE'}")
    lines.append("Output pred = " + ("SCALARS" if model.classes and probabilities else
                                     "MULTICLASS" if model.classes else "SCALAR"))
    return "\n".join(lines) + "\n"
