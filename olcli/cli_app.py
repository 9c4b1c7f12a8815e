"""The olcli command's typer app: one Typer function per command (train, test, vw,
inspect, plot, warm, serve) handing its options to the library. train's and test's
options are made from the table of settings (olcli/cli_options.py, olcli/settings.py);
their bodies are olcli/cli_options.py's ``run_train`` and ``run_test``, which olcli/fastpath.py also
calls when it reads a plain train or test line without typer.

Imported by ``cli.main`` for what the fast path leaves to typer (--help, errors, the
other commands, completion); ``olcli.cli.app`` is this module's ``app``.
"""

from enum import Enum
from typing import List, Optional

import typer
from typer.core import TyperCommand

from olcli import __version__
from olcli import cli_options, signals
from olcli import vw as vw_spellings
from olcli.cli_options import choices_enum
from olcli.errors import UsageError
from olcli.settings import LINKS

Link = choices_enum(LINKS)

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Online linear learning in the spirit of Vowpal Wabbit. "
         "Progress and errors go to stderr; stdout carries only data.",
)


class _VWSpellings(TyperCommand):
    """A command that also takes VW's spellings of its options (olcli/vw.py): they
    are rewritten into olcli's own before the options are parsed."""

    def parse_args(self, ctx, args):
        if self.name == "train":
            args = _with_model_reduction(args)
        if self.name == "train" and vw_spellings.is_cb_line(args):
            if {"-h", "--help"} & set(args):
                args = ["--help"]   # train's help (docs/contextual-bandits.md lists the CB options)
            else:
                from olcli import cb_run   # contextual bandits: the run is olcli/cb_run.py's

                cb_run.run(list(args), command="train")
                ctx.exit(0)
        return super().parse_args(ctx, vw_spellings.rewrite(list(args), _known_options(self), self.name))


def _with_model_reduction(args) -> list:
    """``args``, with the reduction of a contextual-bandit model that ``-i`` names when the line
    enables none (olcli/cb_options.py ``with_model_reduction``: VW reads it from the model)."""
    if any(token == "-i" or token.startswith("--initial_regressor") for token in args):
        from olcli.cb_options import with_model_reduction

        return with_model_reduction(args)
    return list(args)


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
VW_EPILOG = ("VW's spellings work too (-d FILE, --final_regressor, --loss_function, -t, -c, -P N, ...): "
             "docs \"For VW users\"; `olcli vw --help` lists them.")


@app.command(cls=_VWSpellings, epilog=VW_EPILOG)
@cli_options.command("train")
def train(ctx: typer.Context, data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
          **flags):
    """Learn from examples; report progressive validation loss."""
    cli_options.run_train(ctx, data, flags)


@app.command(cls=_VWSpellings, epilog=VW_EPILOG)
@cli_options.command("test")
def test(
    data: Optional[List[str]] = typer.Argument(None, help=DATA_HELP, show_default=False),
    initial_model: str = typer.Option(..., "-i", "--initial-model", help="The model to test (never changed)."),
    **flags,
):
    """Predict and score with a frozen model; no learning."""
    cli_options.run_test(data, initial_model, flags)


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
    args = _with_model_reduction(args)   # -i CB_MODEL alone: the model's reduction, as VW
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
    from olcli import inspection

    inspection.inspect(model, top, readable, invert_hash)


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
    cb_pending: int = typer.Option(10000, "--cb-pending", help="Contextual-bandit model: events kept waiting for "
                                   "their reward (POST /reward); the oldest is dropped beyond."),
    cb_seed: Optional[int] = typer.Option(None, "--cb-seed", show_default=False, help="Contextual-bandit model: "
                                          "the seed of the sampled actions (default: drawn at start, logged)."),
):
    """Serve a model: VW's daemon line protocol, and HTTP/JSON with --http-port."""
    with signals.immediate():   # start-up: a signal stops it at once, also while importing
        from olcli.serve import ServeOptions, serve as run_server

    run_server(ServeOptions(
        model_path=initial_model, host=host, port=port, port_file=port_file, pid_file=pid_file,
        http_port=http_port, http_port_file=http_port_file, learn=learn, final_model=final_model,
        save_every=save_every, link=link.value if link else None, probabilities=probabilities,
        max_line_bytes=max_line_bytes, max_request_bytes=max_request_bytes, max_connections=max_connections,
        idle_timeout=idle_timeout, workers=workers, log_format=log_format, cb_pending=cb_pending,
        cb_seed=cb_seed))
