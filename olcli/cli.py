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
from olcli import settings
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


def _choices(name: str, values: tuple) -> type:
    """An option's few values as the Enum typer lists in --help."""
    return Enum(name, {value: value for value in values}, type=str, module=__name__)


Loss = _choices("Loss", settings.LOSSES)
Link = _choices("Link", settings.LINKS)
HashRule = _choices("HashRule", settings.HASHES)
Format = _choices("Format", settings.FORMATS)
_CHOICES = {settings.LOSSES: Loss, settings.LINKS: Link, settings.HASHES: HashRule}


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


_hyper = settings.HYPER
_features = settings.FEATURES
_multiclass = settings.MULTICLASS


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


_TYPES = {"int": int, "number": float, "number|null": float, "str|null": str}


def _with_settings(command_name: str):
    """Add to a command one option per row of the settings table (olcli/settings.py) that
    it takes (train: the rows made here, ``typer``; test: those with a ``test_help``); the
    command receives them in ``**flags`` (``_settings_given`` reads them)."""
    def decorate(command):
        original = signature(command)
        parameters = [p for p in original.parameters.values() if p.kind != p.VAR_KEYWORD]
        for row in _rows(command_name):
            help_text = row.test_help if command_name == "test" else row.help
            if row.switch:
                annotation, option = bool, typer.Option(False, *row.flags, help=help_text, rich_help_panel=row.panel)
            else:
                # a model's setting not given is None (-i's model decides); a run's shows its default
                shown = row.stored is None and row.default not in (None, 0) and command_name == "train"
                annotation = _CHOICES[row.choices] if row.choices else _TYPES[row.kind]
                option = typer.Option(row.default if shown else None, *row.flags, help=help_text,
                                      rich_help_panel=row.panel, show_default=shown)
                annotation = annotation if shown else Optional[annotation]
            parameters.append(Parameter(row.name, Parameter.KEYWORD_ONLY, annotation=annotation, default=option))
        command.__signature__ = original.replace(parameters=parameters)
        return command
    return decorate


def _rows(command_name: str) -> tuple:
    rows = settings.MODEL_SETTINGS + settings.RUN_SETTINGS
    return tuple(row for row in rows if (row.test_help if command_name == "test" else row.typer))


def _settings_given(flags: dict, command_name: str) -> dict:
    """The settings' options as given: a name's value (an Enum's value), True for a switch
    given, None for an option not given (so that -i can tell)."""
    given = {}
    for row in _rows(command_name):
        value = flags.get(row.name)
        if row.switch:
            value = True if value else None
        given[row.name] = value.value if isinstance(value, Enum) else value
    return given


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
@_with_settings("train")
@_with_algorithm_flags
def train(
    ctx: typer.Context,
    data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
    final_model: Optional[str] = typer.Option(None, "-f", "--final-model", help="Write the model here at the end (atomically)."),
    initial_model: Optional[str] = typer.Option(None, "-i", "--initial-model", help="Continue from this model (all its options and optimizer state)."),
    predictions: Optional[str] = _predictions,
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
    holdout_off: bool = typer.Option(False, "--holdout-off", rich_help_panel=settings.PASSES,
                                     help="With --passes > 1: learn from every example; report progressive loss."),
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
    input_format: Format = _format,
    noconstant: bool = typer.Option(False, "--noconstant", help="No constant (bias) feature."),
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
    given = _settings_given(flags, "train")
    outputs = dict(sources=data or ["-"], initial_model=initial_model, predictions=predictions,
                   input_format=input_format.value, report=report, quiet=quiet, progress=progress, strict=strict,
                   probabilities=probabilities)
    run = {row.name: given.pop(row.name) for row in settings.RUN_SETTINGS if row.name in given}
    if testonly and initial_model:
        return _test_only(ctx, final_model, run, given, dict(outputs, audit=audit, threads=threads,
                                                             progress_every=vw_progress, vw_header=vw_header))
    if testonly and run["passes"] > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    if vw_cache and run["cache_path"] is None and data:
        from olcli.pipeline import default_cache_path

        run["cache_path"] = default_cache_path(data)
    run.update(threads=threads, progress_every=vw_progress, holdout_period=0 if holdout_off else run["holdout_period"])
    cluster = dict(workers=workers, scheduler=scheduler, shards=shards)
    commands.train(
        **outputs, final_model=final_model, algorithm=_chosen_algorithm(flags), options=_hyper_options(flags),
        scale_out=cluster if any(value is not None for value in cluster.values()) else None, run=run,
        settings={**given, "constant": None if not noconstant else False,
                  **_feature_options(quadratic, cubic, interactions, ignore, keep, ignore_linear, ngram, skips)},
        learn=not testonly, vw_header=vw_header, multiclass=_multiclass_option(oaa, softmax),
        text_outputs=dict(audit=audit, invert_hash=invert_hash, readable_model=readable_model))


# What VW's test mode (-t) under train may be given besides what olcli test takes:
# options about learning, which have nothing to do when nothing is learned (VW
# accepts them too). The others would change the model's features or outputs and
# are refused: the model's own settings apply.
_TEST_MODE_IDLE = {"ctx", "testonly", "vw_cache", "vw_progress", "vw_header", "sparse_weights", "final_model",
                   "holdout_off", *(row.name for row in _rows("train") if row.learning_only),
                   *(name.replace("-", "_") for name in ALGORITHMS), *OPTIONS}
_TEST_MODE_KEPT = {"data", "initial_model", "predictions", "probabilities", "audit", "input_format", "report",
                   "quiet", "progress", "strict", "threads", *(row.name for row in _rows("test"))}


def _test_only(ctx, final_model, run, given, arguments) -> None:
    """VW's -t under train: predict and score with -i's model, learn nothing (olcli test);
    -f gets a copy of the model, as VW writes the unchanged model."""
    from olcli import commands

    given_here = [name for name in ctx.params
                  if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"]
    refused = [name for name in given_here if name not in _TEST_MODE_IDLE | _TEST_MODE_KEPT]
    if refused:
        spelled = ", ".join(_spelling(ctx, name) for name in refused)
        raise UsageError(f"-t (test mode) uses the model's own settings: drop {spelled} "
                         "(or train without -t)")
    if run["passes"] > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    commands.test(**arguments, **{row.name: given[row.name] for row in _rows("test")})
    if final_model:
        from olcli.atomic import atomic_write

        with open(arguments["initial_model"], "rb") as source:
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


def _feature_options(quadratic, cubic, interactions, ignore, keep, ignore_linear, ngram, skips) -> dict:
    """The namespace options as given; None for those not given (so -i can tell)."""
    given = {"interactions": None, "ignore": None, "keep": None, "ignore_linear": None,
             "ngram": list(ngram) if ngram else None, "skips": list(skips) if skips else None}
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
@_with_settings("test")
def test(
    data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
    initial_model: str = typer.Option(..., "-i", "--initial-model", help="The model to test (never changed)."),
    predictions: Optional[str] = _predictions,
    probabilities: bool = _probabilities,
    audit: bool = _audit,
    input_format: Format = _format,
    report: Optional[str] = _report,
    quiet: bool = _quiet,
    progress: bool = _progress,
    strict: bool = _strict,
    threads: int = _threads,
    testonly: bool = _testonly,
    vw_progress: Optional[str] = _vw_progress,
    **flags,
):
    """Predict and score with a frozen model; no learning."""
    from olcli import commands

    _vw_notes(vw_progress, False, quiet)
    commands.test(
        sources=data or ["-"], initial_model=initial_model, predictions=predictions,
        input_format=input_format.value, report=report, quiet=quiet, progress=progress, strict=strict,
        probabilities=probabilities, audit=audit, threads=threads, progress_every=vw_progress,
        **_settings_given(flags, "test"),
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
    if vw_spellings.is_cb_line(args):  # --cb_explore_adf / --cb_adf: olcli/cb_run.py
        from olcli import cb_run

        cb_run.run(list(args))
        return
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
    with signals.immediate():   # start-up: a signal stops it at once, also while importing
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
