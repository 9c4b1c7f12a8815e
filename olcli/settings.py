"""The table of settings: every option of a model and of a run, once.

Each row (``Setting``) says what an option is — its name (the keyword of
``Learner``/``new_model`` and of the run), its kind and default, its spellings on
olcli's command line and on VW's, its help and help panel — and what the model
file does with it: where the header stores it (``stored``: a dotted header path,
None for a setting of the run only), whether a run continuing the model (``-i``)
must agree with it (``on_continue="match"``) or may change it (``"run"``), and how
``Learner.merge`` treats it (``merge="equal"``: learners must agree; ``"first"``:
the first learner's is kept).

Two frozen values are built from the table: ``ModelSettings`` (the settings a model
file stores, which ``-i`` and merge compare) and ``RunSettings`` (passes, holdout,
cache, outputs, threads). The limits every layer checks against (``MAX_BITS``, the
links, formats and hash rules, ...) are here too.

The algorithms' hyper-parameters (``-l``, ``--l1``, ...) are the engine's registry
(olcli/engine/registry.py): a model stores them under ``params``.

This module imports nothing of olcli but its errors and olcli/records.py (the record
classes): the model file, the Learner, the command line and ``olcli vw`` read it.
"""

import numbers
from olcli.errors import UsageError
from olcli.records import Frozen

# --- limits ---

MAX_BITS = 30
MAX_CLASSES = 10000
MAX_INTERACTION = 7            # namespaces in one interaction (engine/features.py's, checked by a test)
LOSSES = ("squared", "logistic", "hinge", "absolute", "quantile", "poisson")  # engine/losses.py LOSS_CODES
LINKS = ("identity", "logistic", "poisson")
FORMATS = ("auto", "vw", "libsvm")
HASHES = ("all", "strings")    # VW's --hash values (engine/parse.py name_hash); files before format 4: "all"
HASH_TEXT = {"all": "murmur3_x86_32(name, seed=hash(namespace)) & (2**bits - 1)",   # the header's input.hash
             "strings": "a name of digits only: its integer + seed; else murmur3_x86_32(name, seed); "
                        "seed = hash(namespace) for a feature, hash_seed for a namespace; & (2**bits - 1)"}
MULTICLASS_MODES = ("", "oaa", "softmax")
# --oaa/--softmax labels (VW's oaa.cc indexing): 1..K until a 0 or K is learned from
INDEXING_ZERO, INDEXING_ONE, INDEXING_UNDECIDED = 0, 1, 2
MAX_HASH_SEED = 2 ** 32 - 1
# --initial-weight and --constant: the algorithms whose first slot "w" is the weight itself
INITIAL_WEIGHT_ALGORITHMS = ("gd", "adagrad", "sgd")

# Help panels of olcli train --help
HYPER = "Hyper-parameters"
FEATURES = "Features (VW's namespace options)"
PASSES = "Passes"
MULTICLASS = "Multiclass"
READABLE = "Readable output"
SCALE_OUT = "Scale-out (Dask)"


def one_of(*allowed):
    """A check: the value is one of ``allowed``."""
    return lambda v: None if v in allowed else f"{v!r:.80} is not one of {', '.join(map(repr, allowed))}"


def in_range(low, high):
    """A check: low <= value <= high."""
    return lambda v: None if low <= v <= high else f"{v!r} is not between {low} and {high}"


def whole(low, high):
    """A check: a whole number, low <= value <= high."""
    inside = in_range(low, high)
    return lambda v: inside(v) if isinstance(v, numbers.Integral) else f"{v!r:.80} is not a whole number"


def _interactions(value):
    for spec in value:
        if not isinstance(spec, str) or not 2 <= len(spec) <= MAX_INTERACTION:
            return f"{spec!r:.80} is not 2 to {MAX_INTERACTION} namespace letters"


def _open_unit(value):
    return None if 0.0 < value < 1.0 else f"{value} is not between 0 and 1"


class Setting(Frozen):
    """One option (see the module's docstring); the meaning of each field is beside its
    keyword in ``__init__``."""
    __slots__ = _fields = (
        "name", "kind", "default", "help", "flags", "vw", "panel", "check", "stored", "attribute", "on_continue",
        "merge", "file_default", "older_files", "switch", "typer", "test_help", "keyword", "choices",
        "learning_only", "role", "many", "spells", "hidden", "minimum", "cli_default", "test", "refusal", "shown",
        "estimator")

    def __init__(
            self,
            name: str,
            kind: str,                  # the header's kind: int | number | str | bool | list | str|null | number|null
            default: object,            # a new model's (or run's) value when not given
            help: str = "",
            flags: tuple = (),          # olcli's spellings (train); () = none of its own (spelled by another row)
            vw: tuple = (),             # VW's spellings (olcli/vw.py)
            panel: str | None = None,   # the --help panel (None: Options)
            check: object = None,       # value -> the problem (str), or None when the value is fine
            stored: str | None = None,  # the header path that stores it; None: a setting of the run
            attribute: str = "",        # the Model attribute, when not ``name``
            on_continue: str = "match",  # -i: "match" (a given value must equal the model's) or "run" (changes it)
            merge: str = "equal",       # Learner.merge: "equal" (must agree), "known" (once both know it) or "first"
            file_default: object = None,  # an older file without the field reads as this (None: the field is required)
            older_files: bool = False,  # the field may be missing from an older file (then file_default)
            switch: bool = False,       # the spellings take no value (given: on)
            typer: bool = True,         # olcli train's option is made from the row (False: cli.py spells it: a list,
                                        # an inverted flag, or one option for several rows)
            test_help: str = "",        # olcli test takes it too (a model's setting a test may change), with this help
            keyword: bool = True,       # a keyword of Learner/new_model (False: the model file's only)
            choices: tuple = (),        # the values it takes, when a few names
            learning_only: bool = False,  # acts only when learning: VW's test mode (-t) takes it and does nothing
            # --- how olcli's commands spell it (olcli/cli_options.py) ---
            role: str = "",             # COMMAND_OPTIONS: output | text | scale_out | spelling | vw
                                        # (settings: their table's)
            many: str = "",             # a repeatable option: "join" (the values joined: --ignore a --ignore b
                                        # = "ab") or "list"
            spells: str = "",           # COMMAND_OPTIONS: the setting this option gives a value to (-q -> interactions)
            hidden: bool = False,       # not listed by --help (VW's spellings)
            minimum: int | None = None,  # the command line refuses a smaller number
            cli_default: object = None,  # the command's value when not given, shown by --help (None: not given)
            test: bool = False,         # olcli test takes it too, with this help (test_help: with its own)
            # --- how the library refuses it, shows it, takes it ---
            refusal: str = "",          # new_model's words for a value ``check`` refuses ({value}: the value given);
                                        # "": new_model checks it by its own rule
            shown: tuple = (),          # olcli inspect: (line, words), words with {} for the value
                                        # (olcli/inspection.py: "always" shown, "any" shown when one of its
                                        # values is set (an empty one as -), "set" each shown when set and not
                                        # an older file's value)
            estimator: tuple = (),      # the scikit-learn estimators with this parameter: "classifier", "regressor"
                                        # (olcli/sklearn.py; the default is the row's unless the estimator overrides it)
    ):
        setter = object.__setattr__
        for field_name, value in zip(self._fields, (
                name, kind, default, help, flags, vw, panel, check, stored, attribute, on_continue, merge,
                file_default, older_files, switch, typer, test_help, keyword, choices, learning_only, role, many,
                spells, hidden, minimum, cli_default, test, refusal, shown, estimator)):
            setter(self, field_name, value)

    @property
    def field(self) -> str:
        """The Model attribute that holds it."""
        return self.attribute or self.name

    @property
    def spelled(self) -> str:
        """``name (--flag)``: how a message names the option to a library and a CLI user alike."""
        return f"{self.name} ({'/'.join(self.flags)})" if self.flags else self.name

    def problem(self, value):
        """What is wrong with ``value`` (None: nothing)."""
        return self.check(value) if self.check is not None else None


def _model(name, kind, default, help="", **more) -> Setting:
    return Setting(name, kind, default, help, **more)


# The model's settings, in the header's order of checks (model.HEADER_FIELDS).
MODEL_SETTINGS = (
    _model("algorithm", "str", "mix", stored="algorithm", typer=False, keyword=False,
           estimator=("classifier", "regressor"),
           help="The learner (one flag per algorithm: --adagrad, --ftrl, ...; engine/registry.py)."),
    _model("params", "dict", None, stored="params", typer=False, keyword=False,
           help="The algorithm's hyper-parameters (engine/registry.py OPTIONS: -l, --l1, ...)."),
    _model("bits", "int", 18, "Hash table size 2^N (default 18).", flags=("-b", "--bits"),
           vw=("--bit_precision", "-b"), check=in_range(1, MAX_BITS), stored="bits", shown=("always", "bits: {}"),
           estimator=("classifier", "regressor")),
    _model("loss", "str", None, "Loss function (default squared).", flags=("--loss",),
           test_help="Score with this loss instead of the model's: it changes what is reported, never the "
                     "predictions (the default's weights follow the loss the model learned with); a multiclass "
                     "model, scored by its 0/1 error, takes its own only.",
           vw=("--loss_function",), check=one_of(*LOSSES), choices=LOSSES, stored="loss", shown=("always", "loss: {}"),
           estimator=("classifier", "regressor")),
    _model("quantile_tau", "number", 0.5, "Level of --loss quantile, in (0, 1) (default 0.5).",
           flags=("--quantile-tau",), vw=("--quantile_tau",), check=_open_unit, stored="quantile_tau",
           test_help="Level of --loss quantile (default: the model's).",
           attribute="loss_tau", refusal="quantile_tau (--quantile-tau) must be between 0 and 1 (got {value:g})",
           estimator=("regressor",)),
    _model("link", "str", "identity", "Transform of -p output (default: the model's, identity).",
           flags=("--link",), vw=("--link",), check=one_of(*LINKS), choices=LINKS, stored="link", merge="first",
           test_help="Transform of -p output (default: the model's, identity).", shown=("always", "link: {}")),
    _model("input_format", "str|null", None, "Input format; auto decides from the first non-empty line.",
           flags=("--format",), check=one_of(None, "vw", "libsvm"), stored="input.format", on_continue="run",
           typer=False, keyword=False, choices=FORMATS, cli_default="auto", role="output", test=True,
           merge="known", shown=("always", "input format: {}")),  # -i and merge: --format must agree with the model's once both are known (Learner)
    _model("constant", "bool", True, "No constant (bias) feature.", flags=("--noconstant",),
           vw=("--noconstant",), switch=True, stored="input.constant", typer=False, shown=("always", "constant: {}"),
           estimator=("classifier", "regressor")),
    _model("interactions", "list", (), "Products of namespaces (-q ab, --cubic abc, --interactions abcd).",
           flags=("-q", "--quadratic"), vw=("--quadratic", "-q"), panel=FEATURES, check=_interactions,
           stored="input.interactions", typer=False, older_files=True, file_default=[],
           shown=("any", "interactions: {}")),
    _model("ignore", "str", "", "Drop the namespaces starting with these letters.", flags=("--ignore",),
           vw=("--ignore",), panel=FEATURES, stored="input.ignore", typer=False, older_files=True, file_default="",
           many="join", shown=("any", "ignore: {}")),
    _model("keep", "str", "", "Use only the namespaces starting with these letters.", flags=("--keep",),
           vw=("--keep",), panel=FEATURES, stored="input.keep", typer=False, older_files=True, file_default="",
           many="join", shown=("any", "keep: {}")),
    _model("ignore_linear", "str", "", "Use these namespaces only inside interactions.",
           flags=("--ignore-linear",), vw=("--ignore_linear",), panel=FEATURES, stored="input.ignore_linear",
           typer=False, older_files=True, file_default="", many="join", shown=("any", "ignore-linear: {}")),
    _model("ngram", "list", (), "N-grams of the tokens of every namespace (N) or of one (aN), N 2-7, as VW. "
           "Repeatable.", flags=("--ngram",), vw=("--ngram",), panel=FEATURES, stored="input.ngram", typer=False,
           older_files=True, file_default=[], many="list", shown=("set", "ngram: {}")),
    _model("skips", "list", (), "Skip-grams: up to K tokens skipped inside an n-gram (K or aK, 0-16), as VW.",
           flags=("--skips",), vw=("--skips",), panel=FEATURES, stored="input.skips", typer=False, older_files=True,
           file_default=[], many="list", shown=("set", "skips: {}")),
    _model("hash_seed", "int", 0, "Seed of the namespace hashes (VW's --hash_seed; default 0).",
           flags=("--hash-seed",), vw=("--hash_seed",), panel=FEATURES, check=whole(0, MAX_HASH_SEED),
           stored="input.hash_seed", older_files=True, file_default=0, shown=("set", "hash-seed: {}"),
           refusal="hash_seed (--hash-seed) must be a whole number 0 to 2^32-1 (got {value})"),
    _model("permutations", "bool", False,
           "-q aa pairs every feature with every one, not i <= j (VW's --permutations).",
           flags=("--permutations",), vw=("--permutations",), panel=FEATURES, switch=True,
           stored="input.permutations", older_files=True, file_default=False, shown=("set", "permutations")),
    _model("leave_duplicate_interactions", "bool", False,
           "Keep interactions that repeat an earlier one in another order (-q ab -q ba; -q :: gives ab and ba).",
           flags=("--leave-duplicate-interactions",), vw=("--leave_duplicate_interactions",), panel=FEATURES,
           switch=True, stored="input.leave_duplicate_interactions", older_files=True, file_default=False,
           shown=("set", "leave-duplicate-interactions")),
    # a new model hashes as VW does by default ("strings"); a model keeps its rule (before format 4: "all")
    _model("hash", "str", "strings",
           "How names are hashed: strings = a name of digits only is its number plus the namespace's hash "
           "(VW's default, and olcli's); all = MurmurHash3 of every name. -i: the model's own rule.",
           flags=("--hash",), vw=("--hash",), panel=FEATURES, check=one_of(*HASHES), choices=HASHES,
           stored="input.hash_rule", older_files=True, file_default="all", shown=("set", "hash: {}"),
           refusal=f"hash (--hash) must be one of {', '.join(HASHES)} (got {{value!r}})"),
    # (-i of a predict-only model is refused: it cannot learn)
    _model("predict_only", "dict|null", "",
           "-f writes the weights only, without the optimizer state: the model predicts (test, serve) but "
           "cannot be trained further.",
           flags=("--predict-only-model",), vw=("--predict_only_model",), switch=True, stored="predict_only",
           older_files=True, on_continue="run", keyword=False, learning_only=True,
           shown=("set", "predict-only (weights of --{})")),
    _model("initial_weight", "number", 0.0,
           "Every weight starts at W (VW's --initial_weight; --gd, --adagrad and --sgd; default 0).",
           flags=("--initial-weight",), vw=("--initial_weight",), stored="initial_weight", older_files=True,
           learning_only=True, file_default=0.0),
    _model("initial_constant", "number", 0.0,
           "The constant's weight starts at C (VW's --constant; --gd, --adagrad and --sgd; default 0).",
           flags=("-C", "--constant"), vw=("--constant", "-C"), stored="initial_constant", older_files=True,
           learning_only=True, file_default=0.0),
    _model("multiclass", "str", "", "--oaa or --softmax (spelled with the number of classes).",
           panel=MULTICLASS, check=one_of(*MULTICLASS_MODES), stored="multiclass.mode", typer=False, keyword=False,
           estimator=("classifier",)),
    _model("classes", "int", 0, "K for --oaa K / --softmax K (0: binary or real labels).", flags=("--oaa",),
           vw=("--oaa",), panel=MULTICLASS, stored="multiclass.classes", typer=False, keyword=False),
    _model("indexing", "int", None,
           "--oaa/--softmax labels 0..K-1 (0) or 1..K (1); default: 1..K until a 0 or K is learned (VW's).",
           flags=("--indexing",), vw=("--indexing",), panel=MULTICLASS, check=one_of(0, 1, 2),
           stored="multiclass.indexing", older_files=True, file_default=INDEXING_UNDECIDED),
    _model("min_prediction", "number|null", None,
           "Clip every prediction to at least this (VW's --min_prediction; default: the smallest label seen).",
           flags=("--min-prediction",), vw=("--min_prediction",), stored="prediction_range.min", merge="first"),
    _model("max_prediction", "number|null", None,
           "Clip every prediction to at most this (VW's --max_prediction; default: the largest label seen).",
           flags=("--max-prediction",), vw=("--max_prediction",), stored="prediction_range.max", merge="first"),
    _model("cb", "dict|null", None, "Contextual bandits (olcli vw --cb_explore_adf/--cb_adf/--cb): the reduction's "
           "settings and state (olcli/cb_run.py: rule, cb_type, epsilon...; mtr totals, squarecb's counter, first's "
           "tau); null for other models.", stored="cb", typer=False, keyword=False, older_files=True,
           file_default=None, on_continue="run", merge="first"),
)

# The run's settings: what one run does, never stored in a model.
RUN_SETTINGS = (
    Setting("passes", "int", 1, "Passes over the data (the first builds an example cache).", ("--passes",),
            ("--passes",), PASSES, check=lambda v: None if v >= 1 else "must be at least 1",
            learning_only=True, estimator=("classifier", "regressor")),
    Setting("holdout_period", "int", 10, "With --passes > 1: every K-th example is held out.",
            ("--holdout-period",), ("--holdout_period",), PASSES,
            check=lambda v: None if v == 0 or v >= 2 else "must be 2 or more (or use --holdout-off)",
            learning_only=True),
    Setting("early_terminate", "int", 3, "Stop after K passes without a better holdout loss.",
            ("--early-terminate",), ("--early_terminate",), PASSES,
            check=lambda v: None if v >= 1 else "must be at least 1", learning_only=True),
    Setting("holdout_after", "int", 0, "Hold out every example after the first N of each pass, instead of every "
            "--holdout-period-th; on even with one pass (VW's --holdout_after).", ("--holdout-after",),
            ("--holdout_after",), PASSES, check=lambda v: None if v >= 0 else
            "must be 1 or more (the examples learned from in each pass)", learning_only=True),
    Setting("cache_path", "str|null", None, "Example cache file (default with --passes: DATA.olcache).",
            ("--cache",), ("--cache_file",), PASSES, learning_only=True),
    Setting("kill_cache", "bool", False, "Rebuild the example cache even if it looks current.",
            ("-k", "--kill-cache"), ("--kill_cache", "-k"), PASSES, switch=True, learning_only=True),
    Setting("threads", "int", 2, "Read and parse up to N chunks ahead on threads while one is learned (both cores "
            "busy), and with --oaa/--softmax learn the default's two members on two threads; 1: read, parse and "
            "learn on one thread. The results are the same.",
            ("--threads",), typer=False, check=lambda v: None if v >= 1 else "must be at least 1",
            minimum=1, test=True),
    Setting("progress_every", "str|null", None, "VW's -P/--progress interval.", ("--vw-progress",),
            ("--progress", "-P"), typer=False, hidden=True, test=True),
)

BY_NAME = {setting.name: setting for setting in MODEL_SETTINGS + RUN_SETTINGS}
STORED = tuple(setting for setting in MODEL_SETTINGS if setting.stored)
MUST_MATCH = tuple(setting for setting in STORED if setting.on_continue == "match")
MERGE_EQUAL = tuple(setting for setting in STORED if setting.merge == "equal")
KEYWORDS = tuple(setting for setting in MODEL_SETTINGS if setting.keyword)   # Learner's and new_model's
# the clipping range of predictions (--min-prediction, --max-prediction), low then high
PREDICTION_RANGE = tuple(setting for setting in STORED if setting.stored.startswith("prediction_range."))
# what the parse of a line depends on (the example cache's key, with -b and the format option)
PARSE = tuple(setting for setting in MUST_MATCH if setting.stored.startswith("input."))
# the starts of the weights (--initial-weight, then --constant): INITIAL_WEIGHT_ALGORITHMS take them
STARTS = tuple(setting for setting in STORED if setting.stored in ("initial_weight", "initial_constant"))
# what olcli inspect shows of a model, in the table's order
SHOWN = tuple(setting for setting in MODEL_SETTINGS if setting.shown)
# the settings a test may change in the model it loads (olcli test: the loss and its level; link
# transforms test's output instead)
TEST_CHANGES = tuple(setting for setting in MODEL_SETTINGS if setting.test_help and setting.name != "link")

_KIND = {"int": int, "number": float, "bool": bool, "str": str}


def checked(row: Setting, value):
    """``value`` for ``row``'s setting: refused with the row's words (UsageError) when its
    check finds a problem (the error's fields: ``option`` the row's name, ``value``, ``reason``
    the check's words), else made the row's kind (int, float, bool, str)."""
    problem = row.problem(value) if row.refusal else None
    if problem:
        raise UsageError(row.refusal.format(value=value), option=row.name, value=value, reason=problem)
    if row.many == "join":   # letters: one string, or a sequence of them (--ignore a --ignore b)
        return value if isinstance(value, str) else "".join(value or ())
    return _KIND.get(row.kind, lambda v: v)(value)


def _command(name, kind, help, flags, role, panel=None, **more) -> Setting:
    return Setting(name, kind, False if kind == "bool" else None, help, flags, panel=panel, role=role,
                   switch=kind == "bool", typer=False, keyword=False, **more)


# The options of olcli train that are not a setting of their own: the run's inputs and outputs
# (role "output", "text": the text copies of the model), what it shows, scale-out, VW's spellings
# that set nothing here ("vw"), and options that give a setting its value ("spelling": -q, --oaa).
# In train --help's order; a name is a row of the tables above, placed there.
_TRAIN_OPTIONS = (
    _command("final_model", "str|null", "Write the model here at the end (atomically).", ("-f", "--final-model"),
             "output", learning_only=True),
    _command("initial_model", "str|null", "Continue from this model (all its options and optimizer state).",
             ("-i", "--initial-model"), "output"),
    _command("predictions", "str|null", "Write one prediction per line here ('-' = stdout).", ("-p", "--predictions"),
             "output", test=True),
    _command("quadratic", "list", "Pair the features of two namespaces (first letters; ':' = any), e.g. -q ab. "
             "Repeatable.", ("-q", "--quadratic"), "spelling", FEATURES, spells="interactions", many="list"),
    _command("cubic", "list", "Triples of three namespaces, e.g. --cubic abc. Repeatable.", ("--cubic",), "spelling",
             FEATURES, spells="interactions", many="list"),
    _command("interactions", "list", "Products over 2-7 namespaces, e.g. --interactions abcd. Repeatable.",
             ("--interactions",), "spelling", FEATURES, spells="interactions", many="list"),
    "ignore", "keep", "ignore_linear", "ngram", "skips",
    _command("holdout_off", "bool", "With --passes > 1: learn from every example; report progressive loss.",
             ("--holdout-off",), "spelling", PASSES, spells="holdout_period", learning_only=True),
    _command("oaa", "int|null", "K classes (labels 1..K), one against all with the chosen loss.", ("--oaa",),
             "spelling", MULTICLASS, spells="classes"),
    _command("softmax", "int|null", "K classes (labels 1..K), multinomial logistic loss.", ("--softmax",),
             "spelling", MULTICLASS, spells="classes"),
    _command("probabilities", "bool", "-p writes probabilities: K of them for multiclass (1:p1 2:p2 ...), else the "
             "logistic link.", ("--probabilities",), "output", test=True),
    _command("audit", "bool", "Print every example's prediction and features as name:index:value:weight (stdout; "
             "slow).", ("--audit",), "text", READABLE, test=True),
    _command("invert_hash", "str|null", "Also write the model as text with the feature names seen in this run.",
             ("--invert-hash",), "text", READABLE),
    _command("readable_model", "str|null", "Also write the model as text: index:weight and the optimizer state.",
             ("--readable-model",), "text", READABLE),
    "input_format", "constant",
    _command("report", "str|null", "Write the run's numbers as JSON here (schema: docs, Formats).", ("--report",),
             "output", test=True),
    _command("quiet", "bool", "No progress table or summary on stderr (VW's --quiet; -q is --quadratic).",
             ("--quiet",), "output", test=True),
    _command("progress", "bool", "A progress bar instead of the table, when stderr is a terminal (percent done "
             "when the input size is known); the summary still follows.", ("--progress",), "output", test=True),
    _command("strict", "bool", "At a malformed line: stop with exit 1, or skip it, count it and warn.",
             ("--strict/--skip-bad-lines",), "output", test=True),
    "threads",
    _command("workers", "int|null", r"Learn on a local Dask cluster of N worker processes (needs olcli\[dask]).",
             ("--workers",), "scale_out", SCALE_OUT),
    _command("scheduler", "str|null", "Learn on the Dask cluster of this scheduler (e.g. tcp://host:8786).",
             ("--scheduler",), "scale_out", SCALE_OUT),
    _command("shards", "int|null", "With --workers/--scheduler: cut the data into about K shards (default: one per "
             "worker thread, at least one per file).", ("--shards",), "scale_out", SCALE_OUT),
    _command("testonly", "bool", "VW's -t: test mode.", ("--testonly",), "vw", hidden=True, learning_only=True,
             test=True),
    _command("vw_cache", "bool", "VW's -c: the example cache beside the data.", ("--vw-cache",), "vw", hidden=True,
             learning_only=True),
    "progress_every",
    _command("vw_header", "bool", "olcli vw: VW's header lines before the table.", ("--vw-header",), "vw",
             hidden=True, learning_only=True),
    _command("sparse_weights", "bool", "VW's --sparse_weights.", ("--sparse-weights",), "vw", hidden=True,
             learning_only=True),
)
COMMAND_OPTIONS = tuple(row for row in _TRAIN_OPTIONS if not isinstance(row, str))
# train's options in --help's order: these, the algorithms' (engine/registry.py), then the settings' own
TRAIN_OPTIONS = tuple(BY_NAME[row] if isinstance(row, str) else row for row in _TRAIN_OPTIONS)


class _Values(Frozen):
    """A frozen value of one field per row of a table (``RunSettings``, ``ModelSettings``):
    keywords by the rows' names, each defaulting to its row's default (lists as tuples)."""
    __slots__ = ()
    _defaults = {}

    def __init__(self, **values):
        unknown = set(values).difference(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__qualname__}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        setter = object.__setattr__
        for name, default in self._defaults.items():
            setter(self, name, values.get(name, default))

    def as_dict(self) -> dict:
        """Field name -> value, in the table's order."""
        return {name: getattr(self, name) for name in self._fields}


def _frozen(name: str, rows: tuple, doc: str):
    names = tuple(row.name for row in rows)
    return type(name, (_Values,), {"__slots__": names, "_fields": names, "__doc__": doc, "__module__": __name__,
                                   "_defaults": {row.name: _immutable(row.default) for row in rows}})


def _immutable(value):
    return tuple(value) if isinstance(value, list) else value


RunSettings = _frozen("RunSettings", RUN_SETTINGS, "A run's settings, one field per row of RUN_SETTINGS.")


def _model_settings_class():
    """``ModelSettings``, made on first use (a run of train or test never needs it)."""
    if "ModelSettings" not in globals():
        globals()["ModelSettings"] = _frozen("ModelSettings", MODEL_SETTINGS, "A model's settings (what its file "
                                             "stores; what -i and merge compare), one field per row of MODEL_SETTINGS.")
    return globals()["ModelSettings"]


def __getattr__(name):
    if name == "ModelSettings":
        return _model_settings_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def model_settings(model):
    """A model's settings as a frozen ``ModelSettings`` value (lists as tuples, dicts as sorted item tuples)."""
    values = {}
    for row in MODEL_SETTINGS:
        value = getattr(model, row.field)
        if isinstance(value, dict):
            value = tuple(sorted(value.items()))
        values[row.name] = _immutable(value)
    return _model_settings_class()(**values)


def run_settings(**given) -> "RunSettings":
    """The run's settings: the given values (None: not given, the default), each checked
    (a UsageError worded from its fields, ``option reason``, that the CLI words with the
    row's flag instead of the keyword)."""
    values = {}
    for row in RUN_SETTINGS:
        value = given.pop(row.name, None)
        value = row.default if value is None else value
        problem = row.problem(value)
        if problem:  # worded from the fields: "passes must be at least 1" (the CLI: --passes)
            raise UsageError(option=row.name, value=value, reason=problem)
        values[row.name] = value
    if given:
        raise UsageError(f"unknown run settings: {', '.join(sorted(given))}")
    return RunSettings(**values)


def conflicts(model, given: dict) -> tuple | None:
    """The first setting of ``given`` (name -> value; None: not given) that a run
    continuing ``model`` (-i) may not change: (name, the model's value, the value given),
    or None. ``given`` names settings of MUST_MATCH or the algorithm's hyper-parameters
    (compared with ``model.params``)."""
    for name, value in given.items():
        if value is None:
            continue
        row = BY_NAME.get(name)
        if row is None:
            held = model.params[name]
        elif row.on_continue != "match":
            raise UsageError(f"{name} is not a setting -i compares")
        else:
            held = getattr(model, row.field)
        if value != held:
            return name, held, value
    return None


def merge_difference(a, b) -> tuple | None:
    """The first setting two models must share to be merged and do not: (name, a's, b's)."""
    for row in MERGE_EQUAL:
        left, right = getattr(a, row.field), getattr(b, row.field)
        if left != right:
            return row.field, left, right
    return None
