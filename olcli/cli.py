"""Command-line wiring: options -> a model and run options -> library calls.

Errors are translated into ``Error: ...`` on stderr and an exit code in one
place, ``main``. Numba is imported only inside the commands, so that
``olcli --help`` and ``olcli --version`` stay instant.
"""

import os
import signal
import sys

from olcli import signals


def _running_as_command() -> bool:
    """Whether this process is the olcli command (the console script or
    ``python -m olcli``), not a program that imports olcli.cli."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return (spec is not None and spec.name == "olcli.__main__") or os.path.basename(sys.argv[0] or "") == "olcli"


if _running_as_command():
    # First thing, before any other import: a signal from now on is recorded and
    # handled by the command (never a KeyboardInterrupt traceback).
    signals.install()

import traceback  # noqa: E402
from enum import Enum  # noqa: E402
from inspect import Parameter, signature  # noqa: E402
from typing import List, Optional  # noqa: E402

from olcli import paths  # noqa: E402

if _running_as_command():
    # Closed standard streams get /dev/null, so that no file olcli opens takes their place.
    paths.reopen_closed_standard_streams()

import typer  # noqa: E402  (after the handlers: importing typer and rich takes a few tenths of a second)
from typer.core import TyperCommand  # noqa: E402

from olcli import __version__
from olcli import vw as vw_spellings
from olcli.engine.registry import ALGORITHMS, OPTIONS, option_help
from olcli.errors import OlcliError, UsageError

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Online linear learning in the spirit of Vowpal Wabbit. "
         "Progress and errors go to stderr; stdout carries only data.",
)


class Loss(str, Enum):
    squared = "squared"
    logistic = "logistic"
    hinge = "hinge"
    absolute = "absolute"
    quantile = "quantile"
    poisson = "poisson"


class Link(str, Enum):
    identity = "identity"
    logistic = "logistic"
    poisson = "poisson"


class HashRule(str, Enum):
    all = "all"
    strings = "strings"


class Format(str, Enum):
    auto = "auto"
    vw = "vw"
    libsvm = "libsvm"


class _VWSpellings(TyperCommand):
    """A command that also takes VW's spellings of its options (olcli/vw.py): they
    are rewritten into olcli's own before the options are parsed."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, vw_spellings.rewrite(list(args), _known_options(self), self.name))


def _known_options(command) -> vw_spellings.Known:
    options, choices = {}, {}
    for param in command.params:
        if param.param_type_name == "option":
            for name in (*param.opts, *param.secondary_opts):
                options[name] = not param.is_flag and not param.count
                annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
                if isinstance(annotation, type) and issubclass(annotation, Enum):
                    choices[name] = [member.value for member in annotation]
    options["--help"] = False
    return vw_spellings.Known(options, choices)


_PATH_WORDS = ("model", "predictions", "report", "cache", "file", "hash", "readable", "output")


def plain_metavars(command) -> None:
    """Show each option's value in --help as INT, FLOAT, PATH, TEXT or [a|b|c] (a flag
    shows none), for the command and its subcommands."""
    from typing import get_args, get_origin

    for cmd in [command, *getattr(command, "commands", {}).values()]:
        for param in cmd.params:
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is None or param.metavar is not None:
                continue
            annotation = descriptor.annotation
            listed = get_origin(annotation) is list
            if listed:
                annotation = (get_args(annotation) or (str,))[0]
            if getattr(param, "is_flag", False) or annotation is bool:
                label = ""
            elif isinstance(annotation, type) and issubclass(annotation, Enum):
                values = [member.value for member in annotation]
                label = "[" + "|".join(values) + "]"
                if len(label) > 21:  # keeps the column narrow; the help lists them all
                    label = "[" + "|".join(values[:2]) + "|…]"
                    if "Choices" not in (param.help or ""):
                        param.help = f"{param.help or ''} Choices: {', '.join(values)}.".strip()
            elif annotation is int:
                label = "INT"
            elif annotation is float:
                label = "FLOAT"
            elif param.param_type_name == "argument":
                label = param.name.upper()
            elif param.name == "scheduler":
                label = "ADDRESS"
            elif any(word in param.name for word in _PATH_WORDS):
                label = "PATH"
            else:
                label = "TEXT"
            param.metavar = label
            if param.param_type_name == "argument":
                param.display_type_rich = lambda ctx: None  # the name (DATA) says it
        original = getattr(cmd, "get_help_option", None)
        if original is not None and not getattr(original, "plain", False):
            def get_help_option(ctx, original=original):
                option = original(ctx)
                if option is not None:
                    option.metavar = ""
                return option

            get_help_option.plain = True
            cmd.get_help_option = get_help_option


def _version(value: bool):
    if value:
        typer.echo(f"olcli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    show_traceback: bool = typer.Option(False, "--traceback",
                                        help="Show a Python traceback with errors (for bug reports)."),
):
    """olcli: train and test linear models on VW or libsvm text, from files or pipes."""


DATA_HELP = "Data files (.gz, .bz2 too) or '-' for stdin; none = stdin."

# Options shared by train and test.
_predictions = typer.Option(None, "-p", "--predictions", help="Write one prediction per line here ('-' = stdout).")
_link = typer.Option(None, "--link", help="Transform of -p output (default: the model's, identity).")
_report = typer.Option(None, "--report", help="Write the run's numbers as JSON here (schema: docs, Formats).")
_quiet = typer.Option(False, "--quiet", help="No progress table or summary on stderr (VW's --quiet; -q is --quadratic).")
_progress = typer.Option(False, "--progress", help="A progress bar instead of the table, when stderr is a "
                         "terminal (percent done when the input size is known); the summary still follows.")
_strict = typer.Option(False, "--strict/--skip-bad-lines",
                       help="At a malformed line: stop with exit 1, or skip it, count it and warn.")
_threads = typer.Option(2, "--threads", min=1,
                        help="Read and parse up to N chunks ahead on threads while one is learned (both cores "
                             "busy); 1: read, parse and learn on one thread. The results are the same.")
_probabilities = typer.Option(False, "--probabilities", help="-p writes probabilities: K of them for "
                              "multiclass (1:p1 2:p2 ...), else the logistic link.")
_audit = typer.Option(False, "--audit", rich_help_panel="Readable output",
                      help="Print every example's prediction and features as name:index:value:weight (stdout; slow).")
_format = typer.Option(Format.auto, "--format", help="Input format; auto decides from the first non-empty line.")
_testonly = typer.Option(False, "--testonly", hidden=True, help="VW's -t: test mode.")
_vw_progress = typer.Option(None, "--vw-progress", hidden=True, help="VW's -P/--progress interval.")
_vw_header = typer.Option(False, "--vw-header", hidden=True, help="olcli vw: VW's header lines before the table.")


_hyper = "Hyper-parameters"
_features = "Features (VW's namespace options)"
_passes = "Passes"
_multiclass = "Multiclass"


def _with_algorithm_flags(command):
    """Add, from the registry, one boolean flag per algorithm (--adagrad, --ftrl, ...)
    and one option per hyper-parameter option (-l, --l1, ...) to a command; the
    command receives them in ``**flags``."""
    original = signature(command)
    parameters = [p for p in original.parameters.values() if p.kind != p.VAR_KEYWORD]
    for algorithm in ALGORITHMS.values():
        parameters.append(Parameter(
            algorithm.name.replace("-", "_"), Parameter.KEYWORD_ONLY, annotation=bool,
            default=typer.Option(False, f"--{algorithm.name}", help=algorithm.summary,
                                 rich_help_panel="Algorithm (one of)")))
    for name, option in OPTIONS.items():
        if option.switch:  # a flag: given = on; not given = the algorithm's rules decide
            parameters.append(Parameter(
                name, Parameter.KEYWORD_ONLY, annotation=bool,
                default=typer.Option(False, *option.flags, help=option_help(name), rich_help_panel=_hyper)))
            continue
        parameters.append(Parameter(
            name, Parameter.KEYWORD_ONLY, annotation=Optional[float],
            default=typer.Option(None, *option.flags, help=option_help(name), show_default=False,
                                 rich_help_panel=_hyper)))
    command.__signature__ = original.replace(parameters=parameters)
    return command


def _hyper_options(flags: dict) -> dict:
    """The hyper-parameter options as given (None: not given; a switch given: 1)."""
    return {name: (1.0 if flags.get(name) else None) if option.switch else flags.get(name)
            for name, option in OPTIONS.items()}


def _chosen_algorithm(flags: dict) -> str:
    chosen = [name for name in ALGORITHMS if flags.get(name.replace("-", "_"))]
    if len(chosen) > 1:
        raise UsageError("choose one algorithm, not " + " and ".join(f"--{name}" for name in chosen))
    # none: the default, or the learner that options the default does not take select
    # (commands.implied_algorithm, which knows whether -i's model decides instead)
    return chosen[0] if chosen else None



VW_EPILOG = ("VW's spellings work too (-d FILE, --final_regressor, --loss_function, -t, -c, -P N, ...): "
             "docs \"For VW users\"; `olcli vw --help` lists them.")


@app.command(cls=_VWSpellings, epilog=VW_EPILOG)
@_with_algorithm_flags
def train(
    ctx: typer.Context,
    data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
    final_model: Optional[str] = typer.Option(None, "-f", "--final-model", help="Write the model here at the end (atomically)."),
    initial_model: Optional[str] = typer.Option(None, "-i", "--initial-model", help="Continue from this model (all its options and optimizer state)."),
    predictions: Optional[str] = _predictions,
    bits: Optional[int] = typer.Option(None, "-b", "--bits", help="Hash table size 2^N (default 18).", show_default=False),
    loss: Optional[Loss] = typer.Option(None, "--loss", help="Loss function (default squared).", show_default=False),
    quantile_tau: Optional[float] = typer.Option(None, "--quantile-tau", show_default=False,
                                                 help="Level of --loss quantile, in (0, 1) (default 0.5)."),
    quadratic: Optional[List[str]] = typer.Option(None, "-q", "--quadratic", rich_help_panel=_features, show_default=False,
                                                  help="Pair the features of two namespaces (first letters; ':' = any), e.g. -q ab. Repeatable."),
    cubic: Optional[List[str]] = typer.Option(None, "--cubic", rich_help_panel=_features, show_default=False,
                                              help="Triples of three namespaces, e.g. --cubic abc. Repeatable."),
    interactions: Optional[List[str]] = typer.Option(None, "--interactions", rich_help_panel=_features, show_default=False,
                                                     help="Products over 2-7 namespaces, e.g. --interactions abcd. Repeatable."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", rich_help_panel=_features, show_default=False,
                                               help="Drop the namespaces starting with these letters."),
    keep: Optional[List[str]] = typer.Option(None, "--keep", rich_help_panel=_features, show_default=False,
                                             help="Use only the namespaces starting with these letters."),
    ignore_linear: Optional[List[str]] = typer.Option(None, "--ignore-linear", rich_help_panel=_features, show_default=False,
                                                      help="Use these namespaces only inside interactions."),
    ngram: Optional[List[str]] = typer.Option(None, "--ngram", rich_help_panel=_features, show_default=False,
                                              help="N-grams of the tokens of every namespace (N) or of one (aN), "
                                                   "N 2-7, as VW. Repeatable."),
    skips: Optional[List[str]] = typer.Option(None, "--skips", rich_help_panel=_features, show_default=False,
                                              help="Skip-grams: up to K tokens skipped inside an n-gram (K or aK, "
                                                   "0-16), as VW."),
    hash_seed: Optional[int] = typer.Option(None, "--hash-seed", rich_help_panel=_features, show_default=False,
                                            help="Seed of the namespace hashes (VW's --hash_seed; default 0)."),
    hash_rule: Optional[HashRule] = typer.Option(
        None, "--hash", rich_help_panel=_features, show_default=False,
        help="How names are hashed: strings = a name of digits only is its number plus the namespace's hash "
             "(VW's default, and olcli's); all = MurmurHash3 of every name. -i: the model's own rule."),
    permutations: bool = typer.Option(False, "--permutations", rich_help_panel=_features,
                                      help="-q aa pairs every feature with every one, not i <= j (VW's --permutations)."),
    leave_duplicate_interactions: bool = typer.Option(
        False, "--leave-duplicate-interactions", rich_help_panel=_features,
        help="Keep interactions that repeat an earlier one in another order (-q ab -q ba; -q :: gives ab and ba)."),
    indexing: Optional[int] = typer.Option(
        None, "--indexing", rich_help_panel=_multiclass, show_default=False,
        help="--oaa/--softmax labels 0..K-1 (0) or 1..K (1); default: 1..K until a 0 or K is learned (VW's)."),
    initial_weight: Optional[float] = typer.Option(
        None, "--initial-weight", show_default=False,
        help="Every weight starts at W (VW's --initial_weight; --gd, --adagrad and --sgd; default 0)."),
    initial_constant: Optional[float] = typer.Option(
        None, "-C", "--constant", show_default=False,
        help="The constant's weight starts at C (VW's --constant; --gd, --adagrad and --sgd; default 0)."),
    predict_only_model: bool = typer.Option(False, "--predict-only-model", show_default=False,
                                            help="-f writes the weights only, without the optimizer state: the "
                                                 "model predicts (test, serve) but cannot be trained further."),
    passes: int = typer.Option(1, "--passes", rich_help_panel=_passes,
                               help="Passes over the data (the first builds an example cache)."),
    holdout_period: int = typer.Option(10, "--holdout-period", rich_help_panel=_passes,
                                       help="With --passes > 1: every K-th example is held out."),
    holdout_off: bool = typer.Option(False, "--holdout-off", rich_help_panel=_passes,
                                     help="With --passes > 1: learn from every example; report progressive loss."),
    holdout_after: Optional[int] = typer.Option(
        None, "--holdout-after", rich_help_panel=_passes, show_default=False,
        help="Hold out every example after the first N of each pass, instead of every --holdout-period-th; "
             "on even with one pass (VW's --holdout_after)."),
    early_terminate: int = typer.Option(3, "--early-terminate", rich_help_panel=_passes,
                                        help="Stop after K passes without a better holdout loss."),
    cache: Optional[str] = typer.Option(None, "--cache", rich_help_panel=_passes, show_default=False,
                                        help="Example cache file (default with --passes: DATA.olcache)."),
    kill_cache: bool = typer.Option(False, "-k", "--kill-cache", rich_help_panel=_passes,
                                    help="Rebuild the example cache even if it looks current."),
    oaa: Optional[int] = typer.Option(None, "--oaa", rich_help_panel=_multiclass, show_default=False,
                                      help="K classes (labels 1..K), one against all with the chosen loss."),
    softmax: Optional[int] = typer.Option(None, "--softmax", rich_help_panel=_multiclass, show_default=False,
                                          help="K classes (labels 1..K), multinomial logistic loss."),
    probabilities: bool = _probabilities,
    audit: bool = _audit,
    invert_hash: Optional[str] = typer.Option(None, "--invert-hash", rich_help_panel="Readable output",
                                              show_default=False,
                                              help="Also write the model as text with the feature names seen in this run."),
    readable_model: Optional[str] = typer.Option(None, "--readable-model", rich_help_panel="Readable output",
                                                 show_default=False,
                                                 help="Also write the model as text: index:weight and the optimizer state."),
    link: Optional[Link] = _link,
    input_format: Format = _format,
    noconstant: bool = typer.Option(False, "--noconstant", help="No constant (bias) feature."),
    min_prediction: Optional[float] = typer.Option(
        None, "--min-prediction", show_default=False,
        help="Clip every prediction to at least this (VW's --min_prediction; default: the smallest label seen)."),
    max_prediction: Optional[float] = typer.Option(
        None, "--max-prediction", show_default=False,
        help="Clip every prediction to at most this (VW's --max_prediction; default: the largest label seen)."),
    report: Optional[str] = _report,
    quiet: bool = _quiet,
    progress: bool = _progress,
    strict: bool = _strict,
    threads: int = _threads,
    workers: Optional[int] = typer.Option(None, "--workers", rich_help_panel="Scale-out (Dask)", show_default=False,
                                          help=r"Learn on a local Dask cluster of N worker processes (needs olcli\[dask])."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", rich_help_panel="Scale-out (Dask)", show_default=False,
                                            help="Learn on the Dask cluster of this scheduler (e.g. tcp://host:8786)."),
    shards: Optional[int] = typer.Option(None, "--shards", rich_help_panel="Scale-out (Dask)", show_default=False,
                                         help="With --workers/--scheduler: cut the data into about K shards "
                                              "(default: one per worker thread, at least one per file)."),
    testonly: bool = _testonly,
    vw_cache: bool = typer.Option(False, "--vw-cache", hidden=True, help="VW's -c: the example cache beside the data."),
    vw_progress: Optional[str] = _vw_progress,
    vw_header: bool = _vw_header,
    sparse_weights: bool = typer.Option(False, "--sparse-weights", hidden=True, help="VW's --sparse_weights."),
    **flags,
):
    """Learn from examples; report progressive validation loss."""
    from olcli import commands

    _vw_notes(vw_progress, sparse_weights, quiet)
    if testonly and initial_model:
        return _test_only(ctx, data, initial_model, final_model, passes, dict(
            sources=data or ["-"], initial_model=initial_model, predictions=predictions,
            loss=loss.value if loss else None, quantile_tau=quantile_tau, link=link.value if link else None,
            input_format=input_format.value, report=report, quiet=quiet, progress=progress, strict=strict,
            probabilities=probabilities, audit=audit, threads=threads, progress_every=vw_progress,
            vw_header=vw_header))
    if testonly and passes > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    if vw_cache and cache is None and data:
        from olcli.pipeline import default_cache_path

        cache = default_cache_path(data)
    options = _hyper_options(flags)
    cluster = dict(workers=workers, scheduler=scheduler, shards=shards)
    commands.train(
        scale_out=cluster if any(value is not None for value in cluster.values()) else None,
        sources=data or ["-"], final_model=final_model, initial_model=initial_model,
        predictions=predictions, algorithm=_chosen_algorithm(flags), options=options, bits=bits,
        loss=loss.value if loss else None, quantile_tau=quantile_tau, link=link.value if link else None,
        input_format=input_format.value, constant=None if not noconstant else False,
        prediction_range=(min_prediction, max_prediction),
        features={**_feature_options(quadratic, cubic, interactions, ignore, keep, ignore_linear),
                  **_generated_options(ngram, skips, hash_seed, hash_rule, permutations,
                                       leave_duplicate_interactions)},
        predict_only_model=predict_only_model, initial_weight=initial_weight, indexing=indexing,
        initial_constant=initial_constant, report=report, quiet=quiet, progress=progress, strict=strict,
        passes=dict(passes=passes, holdout_period=0 if holdout_off else holdout_period,
                    holdout_after=holdout_after or 0, progress_every=vw_progress,
                    early_terminate=early_terminate, cache_path=cache, kill_cache=kill_cache, threads=threads),
        learn=not testonly, vw_header=vw_header,
        multiclass=_multiclass_option(oaa, softmax), probabilities=probabilities,
        text_outputs=dict(audit=audit, invert_hash=invert_hash, readable_model=readable_model),
    )


# What VW's test mode (-t) under train may be given besides what olcli test takes:
# options about learning, which have nothing to do when nothing is learned (VW
# accepts them too). The others would change the model's features or outputs and
# are refused: the model's own settings apply.
_TEST_MODE_IDLE = {"ctx", "testonly", "vw_cache", "vw_progress", "vw_header", "sparse_weights", "final_model",
                   "passes", "predict_only_model", "initial_weight", "initial_constant", "holdout_after",
                   "holdout_period", "holdout_off", "early_terminate", "cache", "kill_cache",
                   *(name.replace("-", "_") for name in ALGORITHMS), *OPTIONS}
_TEST_MODE_KEPT = {"data", "initial_model", "predictions", "loss", "quantile_tau", "probabilities", "audit",
                   "link", "input_format", "report", "quiet", "progress", "strict", "threads"}


def _test_only(ctx, data, initial_model, final_model, passes, arguments) -> None:
    """VW's -t under train: predict and score with -i's model, learn nothing (olcli test);
    -f gets a copy of the model, as VW writes the unchanged model."""
    from olcli import commands

    given = [name for name in ctx.params
             if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"]
    refused = [name for name in given if name not in _TEST_MODE_IDLE | _TEST_MODE_KEPT]
    if refused:
        spelled = ", ".join(_spelling(ctx, name) for name in refused)
        raise UsageError(f"-t (test mode) uses the model's own settings: drop {spelled} "
                         "(or train without -t)")
    if passes > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    commands.test(**arguments)
    if final_model:
        from olcli.atomic import atomic_write

        with open(initial_model, "rb") as source:
            atomic_write(final_model, source.read(), role="model (-f)")


def _spelling(ctx, name: str) -> str:
    for param in ctx.command.params:
        if param.name == name:
            return param.opts[0] if param.param_type_name == "option" else name.upper()
    return name


def _vw_notes(vw_progress, sparse_weights, quiet) -> None:
    """VW options olcli takes without doing what VW does, or with a value VW changes:
    said, never silent."""
    if vw_progress is not None:
        factor, step = vw_spellings.progress_spacing(vw_progress)  # a bad value is refused, --quiet or not
        if quiet:
            pass
        elif "." in vw_progress and factor != float(vw_progress):  # VW's warnings when it changes the value
            sys.stderr.write(f"warning: multiplicative -P/--progress {vw_progress} is <= 1.0: adding 1.0\n")
        elif "." not in vw_progress and step != float(vw_progress):
            sys.stderr.write(f"warning: additive -P/--progress {vw_progress} can't be < 1: forcing to 1\n")
    if sparse_weights and not quiet:
        sys.stderr.write("note: --sparse_weights: accepted; olcli's weight table is dense by design "
                         "(2^-b rows allocated at the start), so nothing changes\n")


def _multiclass_option(oaa, softmax) -> tuple:
    if oaa is not None and softmax is not None:
        raise UsageError("choose --oaa or --softmax, not both")
    if oaa is not None:
        return "oaa", oaa
    if softmax is not None:
        return "softmax", softmax
    return "", 0


def _generated_options(ngram, skips, hash_seed, hash_rule, permutations, leave_duplicate_interactions) -> dict:
    """--ngram, --skips, --hash-seed, --hash and the interaction flags as given (None: not given, so -i can tell)."""
    return {"ngram": list(ngram) if ngram else None, "skips": list(skips) if skips else None,
            "hash_seed": hash_seed, "hash": hash_rule.value if hash_rule else None,
            "permutations": True if permutations else None,
            "leave_duplicate_interactions": True if leave_duplicate_interactions else None}


def _feature_options(quadratic, cubic, interactions, ignore, keep, ignore_linear) -> dict:
    """The namespace options as given; None for those not given (so -i can tell)."""
    given = {"interactions": None, "ignore": None, "keep": None, "ignore_linear": None}
    specs = []
    for values, length, flag in ((quadratic, 2, "-q"), (cubic, 3, "--cubic"), (interactions, None, "--interactions")):
        for spec in values or []:
            if (length and len(spec) != length) or not 2 <= len(spec) <= 7:
                wanted = f"{length} namespace letters" if length else "2 to 7 namespace letters"
                raise UsageError(f"{flag} {spec!r}: expected {wanted} (first letters of namespaces, ':' for any)")
            specs.append(spec)
    if specs:
        given["interactions"] = specs
    for name, values in (("ignore", ignore), ("keep", keep), ("ignore_linear", ignore_linear)):
        if values:
            given[name] = "".join(values)
    return given


@app.command(cls=_VWSpellings, epilog=VW_EPILOG)
def test(
    data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
    initial_model: str = typer.Option(..., "-i", "--initial-model", help="The model to test (never changed)."),
    predictions: Optional[str] = _predictions,
    loss: Optional[Loss] = typer.Option(None, "--loss", help="Score with this loss instead of the model's.", show_default=False),
    quantile_tau: Optional[float] = typer.Option(None, "--quantile-tau", show_default=False,
                                                 help="Level of --loss quantile (default: the model's)."),
    probabilities: bool = _probabilities,
    audit: bool = _audit,
    link: Optional[Link] = _link,
    input_format: Format = _format,
    report: Optional[str] = _report,
    quiet: bool = _quiet,
    progress: bool = _progress,
    strict: bool = _strict,
    threads: int = _threads,
    testonly: bool = _testonly,
    vw_progress: Optional[str] = _vw_progress,
):
    """Predict and score with a frozen model; no learning."""
    from olcli import commands

    _vw_notes(vw_progress, False, quiet)
    commands.test(
        sources=data or ["-"], initial_model=initial_model, predictions=predictions,
        loss=loss.value if loss else None, quantile_tau=quantile_tau, link=link.value if link else None,
        input_format=input_format.value, report=report, quiet=quiet, progress=progress, strict=strict,
        probabilities=probabilities,
        audit=audit, threads=threads, progress_every=vw_progress,
    )


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                               "help_option_names": ["-h", "--help"]},  # VW's -h too
             no_args_is_help=True, epilog=vw_spellings.summary())
def vw(
    ctx: typer.Context,
    args: List[str] = typer.Argument(..., help="A VW command line, as given to vw (e.g. -d train.vw -f m "
                                     "--loss_function logistic; -t -i m -p preds for test mode).",
                                     show_default=False, metavar="VW_ARGS..."),
):
    """Run a VW command line verbatim (its linear learners): alias vw='olcli vw'.

    VW's default learner (--gd) unless another is chosen, -t is test mode, words that are
    not options are data files. A VW option olcli does not have is
    refused by name with what olcli offers instead (exit 2). The docs' "For VW users" page says
    what each VW option becomes."""
    group = ctx.find_root().command  # the command olcli is running (with its start-up settings)
    arguments = vw_spellings.translate(list(args), _known_options(group.get_command(None, "train")))
    try:
        group.main(["train", *arguments], prog_name="olcli", standalone_mode=False)
    except Exception as exc:  # click's usage errors: one line, as olcli's own (exit 2)
        if hasattr(exc, "format_message") and getattr(exc, "exit_code", None) == 2:
            raise UsageError(exc.format_message()) from None
        raise


@app.command()
def inspect(
    model: str = typer.Argument(..., help="A model file written by olcli train -f."),
    top: int = typer.Option(10, "--top", help="How many of the largest weights to list."),
    readable: bool = typer.Option(False, "--readable", help="Print the whole model as text (as --readable-model)."),
    invert_hash: Optional[List[str]] = typer.Option(None, "--invert-hash", show_default=False,
                                                    help="Print the model as text with feature names read from "
                                                         "this data (repeatable; as train --invert-hash)."),
):
    """Print a model's header, options, counters and largest weights (to stdout)."""
    from olcli import commands

    commands.inspect(model, top, readable, invert_hash)


@app.command()
def plot(
    reports: List[str] = typer.Argument(..., help="JSON reports written by train or test --report.", show_default=False),
    output: Optional[str] = typer.Option(None, "-o", "--output", show_default=False,
                                         help="Write a picture (.png, .svg or .pdf, with Matplotlib); "
                                              "without -o: a text plot on stdout."),
    label: Optional[List[str]] = typer.Option(None, "--label", show_default=False,
                                              help="The runs' names in the legend, in the order of the reports "
                                                   "(repeatable; default: the file name without .json)."),
):
    r"""Learning curves from reports: progressive loss against examples, holdout loss by pass.
    Needs the optional extra olcli\[plot]."""
    from olcli import plot as learning_curves

    learning_curves.plot(reports, output=output, labels=label or [])


@app.command()
def warm(
    algorithm: Optional[List[str]] = typer.Option(None, "--algorithm", show_default=False,
                                                  help="Only this algorithm's kernels (repeatable; default: all)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", show_default=False,
                                       help="Processes compiling at once (default: one per core)."),
):
    """Compile every kernel ahead (once after installing), so that no run compiles."""
    from olcli import warm as kernels

    kernels.warm(algorithm, jobs)


_limits = "Limits"


@app.command()
def serve(
    initial_model: str = typer.Option(..., "-i", "--initial-model", help="The model to serve (reloaded on SIGHUP "
                                      "or POST /reload)."),
    port: int = typer.Option(26542, "--port", help="Line protocol port (VW's daemon: one line in, "
                             "'prediction[ tag]' out); 0 = any free port."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: all interfaces, with a warning)."),
    port_file: Optional[str] = typer.Option(None, "--port-file", show_default=False,
                                            help="Write the line protocol's port here once listening."),
    pid_file: Optional[str] = typer.Option(None, "--pid-file", show_default=False,
                                           help="Write the server's process id here once listening."),
    http_port: Optional[int] = typer.Option(None, "--http-port", show_default=False,
                                            help=r"Also serve HTTP/JSON on this port (0 = any); needs olcli\[serve]."),
    http_port_file: Optional[str] = typer.Option(None, "--http-port-file", show_default=False,
                                                 help="Write the HTTP port here once listening."),
    learn: bool = typer.Option(False, "--learn", help="Learn from labelled lines (progressive: the reply is the "
                               "prediction before learning); needs -f."),
    final_model: Optional[str] = typer.Option(None, "-f", "--final-model", show_default=False,
                                              help="With --learn: save the model here (atomically), every "
                                                   "--save-every seconds and on SIGTERM/SIGINT."),
    save_every: float = typer.Option(60.0, "--save-every", help="With --learn: seconds between saves of a "
                                     "changed model (0 = only on stop)."),
    link: Optional[Link] = typer.Option(None, "--link", help="Transform of the replies (default: the model's link)."),
    probabilities: bool = typer.Option(False, "--probabilities", help="Replies are probabilities: 1:p1 2:p2 ... "
                                       "for multiclass, else the logistic link."),
    max_line_bytes: int = typer.Option(1 << 20, "--max-line-bytes", rich_help_panel=_limits,
                                       help="Longer lines get an error reply."),
    max_request_bytes: int = typer.Option(16 << 20, "--max-request-bytes", rich_help_panel=_limits,
                                          help="Largest HTTP request body (413 above)."),
    max_connections: int = typer.Option(1000, "--max-connections", rich_help_panel=_limits,
                                        help="Open connections per protocol (and per worker); more are refused."),
    idle_timeout: float = typer.Option(300.0, "--idle-timeout", rich_help_panel=_limits,
                                       help="Close a connection idle this many seconds (0 = never)."),
    workers: int = typer.Option(1, "--workers", help="Processes sharing the ports (prediction-only serving)."),
    log_format: str = typer.Option("text", "--log-format", help="Event log on stderr: text or json."),
):
    """Serve a model: VW's daemon line protocol, and HTTP/JSON with --http-port."""
    with signals.immediate():   # start-up: a signal stops it at once, also while importing (issue 31)
        from olcli.serve import ServeOptions, serve as run_server

    run_server(ServeOptions(
        model_path=initial_model, host=host, port=port, port_file=port_file, pid_file=pid_file,
        http_port=http_port, http_port_file=http_port_file, learn=learn, final_model=final_model,
        save_every=save_every, link=link.value if link else None, probabilities=probabilities,
        max_line_bytes=max_line_bytes, max_request_bytes=max_request_bytes, max_connections=max_connections,
        idle_timeout=idle_timeout, workers=workers, log_format=log_format))


def main(argv: Optional[List[str]] = None) -> None:
    """The olcli command: errors -> ``Error: ...`` on stderr and an exit code, in one
    place. 0 ok; 1 data, model or runtime error; 2 usage error; 128 + signal for
    SIGHUP/SIGINT/SIGTERM (129/130/143); 141 when the reader of stdout went away
    (quietly)."""
    standalone = argv is None and _running_as_command()
    installed_here = signals.install()
    if installed_here:
        signals.reset()
    if standalone:
        sys.stderr = paths.QuietWhenGone(sys.stderr)
        try:
            sys.stdout.reconfigure(errors="surrogateescape")  # names from undecodable arguments, as given
        except (AttributeError, ValueError):
            pass
    args = list(sys.argv[1:] if argv is None else argv)
    if "--traceback" in args:  # accepted anywhere on the line, handled by the root command
        args.remove("--traceback")
        args.insert(0, "--traceback")
    code = 0
    try:
        code = _run_app(args)
    finally:
        if installed_here:
            signals.uninstall()
    code = _flush_stdout(code)
    if standalone:
        # Everything is written and flushed: leave now. Not waiting for threads (a
        # reader blocked on a pipe, a parse worker in a kernel), and not through the
        # interpreter's finalization, which puts the default signal handlers back: a
        # late SIGTERM would then kill a run that has already succeeded.
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def _run_app(args: list) -> int:
    """Run the command; returns the exit code, having printed what went wrong."""
    show_traceback = "--traceback" in args
    try:
        try:
            from olcli import startup  # the options checked without pydantic; train/test kernels loaded ahead

            startup.invoke(app, args, command_process=_running_as_command())
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click met a closed stdout pipe
                code = 128 + signal.SIGPIPE
    except signals.RunStopped as exc:
        _error(exc, show_traceback)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # SIGINT in a process where olcli's handler is not installed
        _error(signals.RunStopped(signal.SIGINT), show_traceback, exc)
        return 128 + signal.SIGINT
    except OlcliError as exc:
        if not getattr(exc, "quiet", False):
            _error(exc, show_traceback)
        return exc.exit_code
    except BrokenPipeError:
        # The reader of our stdout went away (e.g. `olcli inspect m | head`).
        return 128 + signal.SIGPIPE
    pending = signals.pending()
    if pending is not None:  # a signal no command acted on (during --help, a refused option, ...)
        signals.commit()
        _error(signals.RunStopped(pending), show_traceback)
        return 128 + pending
    return code


def _error(exc: BaseException, show_traceback: bool, cause: BaseException | None = None) -> None:
    if show_traceback:
        traceback.print_exception(cause or exc, file=sys.stderr)
    try:
        sys.stderr.write(f"Error: {exc}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _flush_stdout(code: int) -> int:
    """The last of stdout: a reader that went away ends the run quietly (141), a full
    disk or an I/O error is an error like any other (1)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_closed_stdout()
        return code or 128 + signal.SIGPIPE
    except OSError as exc:
        _silence_closed_stdout()
        if code == 0:
            _error(OlcliError(f"cannot write standard output: {paths.error_name(exc)}"), False)
            return 1
    except ValueError:
        pass
    return code


def _silence_closed_stdout() -> None:
    """After the reader of stdout went away, the interpreter's final flush would
    raise again (and print "Exception ignored"); point stdout at /dev/null so that
    exit is quiet."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
