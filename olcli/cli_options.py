"""The options of olcli train and test, made from the table of settings (olcli/settings.py)
and the engine's registry, and the values they give turned back into the keywords of
``commands.train`` and ``commands.test`` (``run_train``, ``run_test``: the bodies of both
commands, which the typer app, olcli/cli_app.py, and olcli/fastpath.py call).

Each row becomes one Typer option: a switch (``--noconstant``), a repeatable option
(``many``: ``-q``, ``--ignore``), a choice (an Enum of the row's ``choices``) or a value of
the row's kind. A model's setting not given is None, so that ``-i``'s model decides; a
run's setting shows its default. The order of the options (and so of ``--help``) is
``settings.TRAIN_OPTIONS``, then one flag per algorithm and one option per
hyper-parameter (engine/registry.py), then the settings the table's rows spell
themselves (``typer``).
"""

import sys
from enum import Enum
from typing import List, Optional

from olcli import settings
from olcli.engine.registry import ALGORITHMS, OPTIONS, option_help
from olcli.errors import UsageError

# typer is imported where an option is made (``command``), not here: the fast path of
# train and test (olcli/fastpath.py) reads the same rows without typer.

_CHOICE_NAMES = {settings.LOSSES: "Loss", settings.LINKS: "Link", settings.HASHES: "HashRule",
                 settings.FORMATS: "Format"}
_ENUMS: dict = {}


def choices_enum(values: tuple) -> type:
    """An option's few values as the Enum typer lists in --help (``Loss``, ``Link``,
    ``HashRule``, ``Format``; made on first need)."""
    if values not in _ENUMS:
        _ENUMS[values] = Enum(_CHOICE_NAMES[values], {value: value for value in values}, type=str, module=__name__)
    return _ENUMS[values]


def __getattr__(name):
    for values, enum_name in _CHOICE_NAMES.items():
        if name == enum_name:
            return choices_enum(values)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_TYPES = {"int": int, "int|null": int, "number": float, "number|null": float, "str|null": str}
_SETTING_ROWS = settings.MODEL_SETTINGS + settings.RUN_SETTINGS


def rows(command_name: str) -> tuple:
    """The table's rows that are options of ``command_name`` (train or test), in its order."""
    own = tuple(row for row in _SETTING_ROWS if row.typer)
    if command_name == "test":
        return tuple(row for row in settings.TRAIN_OPTIONS if row.test) + tuple(
            row for row in settings.MODEL_SETTINGS if row.test_help)
    return settings.TRAIN_OPTIONS + own


def _option(row, command_name: str) -> tuple:
    """(annotation, typer.Option) of one row."""
    import typer

    common = dict(help=row.test_help if command_name == "test" and row.test_help else row.help,
                  rich_help_panel=row.panel, hidden=row.hidden)
    if row.switch:
        return bool, typer.Option(False, *row.flags, **common)
    if row.many:
        return Optional[List[str]], typer.Option(None, *row.flags, show_default=False, **common)
    annotation = choices_enum(row.choices) if row.choices else _TYPES[row.kind]
    if row.cli_default is not None:
        return annotation, typer.Option(annotation(row.cli_default), *row.flags, min=row.minimum, **common)
    # a model's setting not given is None (-i's model decides); a run's shows its default
    shown = row.stored is None and row.default not in (None, 0)
    option = typer.Option(row.default if shown else None, *row.flags, show_default=shown, min=row.minimum, **common)
    return (annotation if shown else Optional[annotation]), option


def command(command_name: str):
    """Add to a command its options from the table (``rows``) and, for train, the
    algorithms' flags and hyper-parameters (after the table's placed rows, before the
    settings' own); the command receives them in ``**flags``."""
    from inspect import Parameter, signature

    def decorate(function):
        original = signature(function)
        parameters = [p for p in original.parameters.values() if p.kind != p.VAR_KEYWORD]
        table = rows(command_name)
        if command_name == "train":
            placed = len(settings.TRAIN_OPTIONS)
            table, own = table[:placed], table[placed:]
        for row in table:
            annotation, option = _option(row, command_name)
            parameters.append(Parameter(row.name, Parameter.KEYWORD_ONLY, annotation=annotation, default=option))
        if command_name == "train":
            parameters += _algorithm_parameters()
            for row in own:
                annotation, option = _option(row, command_name)
                parameters.append(Parameter(row.name, Parameter.KEYWORD_ONLY, annotation=annotation, default=option))
        function.__signature__ = original.replace(parameters=parameters)
        return function
    return decorate


def _algorithm_parameters() -> list:
    """One boolean flag per algorithm (--adagrad, --ftrl, ...) and one option per
    hyper-parameter option (-l, --l1, ...), from the registry."""
    from inspect import Parameter

    import typer

    parameters = []
    for algorithm in ALGORITHMS.values():
        parameters.append(Parameter(
            algorithm.name.replace("-", "_"), Parameter.KEYWORD_ONLY, annotation=bool,
            default=typer.Option(False, f"--{algorithm.name}", help=algorithm.summary,
                                 rich_help_panel="Algorithm (one of)")))
    for name, option in OPTIONS.items():
        if option.switch:  # a flag: given = on; not given = the algorithm's rules decide
            parameters.append(Parameter(
                name, Parameter.KEYWORD_ONLY, annotation=bool,
                default=typer.Option(False, *option.flags, help=option_help(name), rich_help_panel=settings.HYPER)))
            continue
        parameters.append(Parameter(
            name, Parameter.KEYWORD_ONLY, annotation=Optional[float],
            default=typer.Option(None, *option.flags, help=option_help(name), show_default=False,
                                 rich_help_panel=settings.HYPER)))
    return parameters


def value(row, given):
    """The value an option gives its row: an Enum's value; for a setting, None when not
    given (so that -i can tell), a switch given the opposite of the row's default, a
    repeatable option's values joined or listed."""
    given = given.value if isinstance(given, Enum) else given
    if settings.BY_NAME.get(row.name) is not row:   # a command's option (settings.COMMAND_OPTIONS)
        return given
    if row.switch:
        return (row.default is not True) if given else None
    if row.many == "join":
        return "".join(given) if given else None
    if row.many == "list":
        return list(given) if given else None
    return given


def test_keywords(data, initial_model, flags: dict) -> dict:
    """commands.test's keywords from the options of test (or of train's -t)."""
    keywords = {"sources": data or ["-"], "initial_model": initial_model}
    for row in rows("test"):
        if row.role != "vw":
            keywords[row.name] = value(row, flags[row.name])
    return keywords


def train_keywords(data, flags: dict) -> dict:
    """commands.train's keywords from train's options: the outputs by name, and the
    ``settings``, ``run``, ``text_outputs`` and ``scale_out`` groups."""
    groups = {"output": {"sources": data or ["-"]}, "text": {}, "scale_out": {}, "settings": {}, "run": {}}
    for row in rows("train"):
        role = row.role or ("run" if row in settings.RUN_SETTINGS else "settings")
        if role in groups:
            groups[role][row.name] = value(row, flags[row.name])
    run = groups["run"]
    for row in settings.COMMAND_OPTIONS:   # a switch that spells a run's setting turns it off (--holdout-off)
        if row.role == "spelling" and row.switch and flags[row.name]:
            run[row.spells] = 0
    if flags["vw_cache"] and run["cache_path"] is None and data:
        from olcli.pipeline import default_cache_path

        run["cache_path"] = default_cache_path(data)
    scale_out = groups["scale_out"]
    return dict(
        groups["output"], algorithm=chosen_algorithm(flags), options=hyper_options(flags), run=run,
        settings=dict(groups["settings"], **_interactions(flags)), multiclass=_multiclass(flags["oaa"], flags["softmax"]),
        scale_out=scale_out if any(value is not None for value in scale_out.values()) else None,
        text_outputs=groups["text"], learn=not flags["testonly"], vw_header=flags["vw_header"])


def hyper_options(flags: dict) -> dict:
    """The hyper-parameter options as given (None: not given; a switch given: 1)."""
    return {name: (1.0 if flags.get(name) else None) if option.switch else flags.get(name)
            for name, option in OPTIONS.items()}


def chosen_algorithm(flags: dict) -> str | None:
    """The algorithm flag given (None: none, the default or the learner the options imply
    decides: commands.implied_algorithm, which knows whether -i's model decides instead)."""
    chosen = [name for name in ALGORITHMS if flags.get(name.replace("-", "_"))]
    if len(chosen) > 1:
        raise UsageError("choose one algorithm, not " + " and ".join(f"--{name}" for name in chosen))
    return chosen[0] if chosen else None


def _multiclass(oaa, softmax) -> tuple:
    """(mode, classes) from --oaa K or --softmax K."""
    if oaa is not None and softmax is not None:
        raise UsageError("choose --oaa or --softmax, not both")
    if oaa is not None:
        return "oaa", oaa
    if softmax is not None:
        return "softmax", softmax
    return "", 0


_LETTERS = {"quadratic": 2, "cubic": 3}   # namespaces in one -q, --cubic (--interactions: 2 to 7)


def _interactions(flags: dict) -> dict:
    """The interactions setting from -q, --cubic and --interactions (None: none given)."""
    specs = []
    for row in settings.COMMAND_OPTIONS:
        if row.spells != "interactions":
            continue
        length = _LETTERS.get(row.name)
        for spec in flags[row.name] or []:
            if (length and len(spec) != length) or not 2 <= len(spec) <= settings.MAX_INTERACTION:
                wanted = f"{length} namespace letters" if length else f"2 to {settings.MAX_INTERACTION} namespace letters"
                raise UsageError(f"{row.flags[0]} {spec!r}: expected {wanted} (first letters of namespaces, ':' for any)")
            specs.append(spec)
    return {"interactions": specs or None}


def given_here(ctx) -> list:
    """The names of the options given on the command line (not left at their defaults)."""
    return [name for name in ctx.params if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"]


# --- the bodies of olcli train and test (the typer commands, olcli/cli_app.py, and the fast path) ---

def run_train(ctx, data: Optional[List[str]], flags: dict) -> None:
    """olcli train: learn from examples; report progressive validation loss. ``flags``: the
    command's options by name, as typer gives them (``ctx``: click's context, None from the
    fast path, which leaves -t to typer)."""
    from olcli import commands

    _vw_notes(flags["progress_every"], flags["sparse_weights"], flags["quiet"])
    if flags["testonly"] and flags["initial_model"]:
        return _test_only(ctx, data, flags)
    if flags["testonly"] and flags["passes"] > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    commands.train(**train_keywords(data, flags))


def run_test(data: Optional[List[str]], initial_model: str, flags: dict) -> None:
    """olcli test: predict and score with a frozen model; no learning."""
    from olcli import commands

    _vw_notes(flags["progress_every"], False, flags["quiet"])
    commands.test(**test_keywords(data, initial_model, flags))


def _test_only(ctx, data, flags) -> None:
    """VW's -t under train: predict and score with -i's model, learn nothing (olcli test);
    -f gets a copy of the model, as VW writes the unchanged model."""
    from olcli import commands

    refused = [name for name in given_here(ctx) if name not in TEST_MODE_ALLOWED]
    if refused:
        spelled = ", ".join(_spelling(ctx, name) for name in refused)
        raise UsageError(f"-t (test mode) uses the model's own settings: drop {spelled} "
                         "(or train without -t)")
    if flags["passes"] > 1:
        raise UsageError("-t (test mode) with --passes: olcli tests in one pass over the data")
    commands.test(**test_keywords(data, flags["initial_model"], flags), vw_header=flags["vw_header"])
    if flags["final_model"]:
        from olcli.atomic import atomic_write

        with open(flags["initial_model"], "rb") as source:
            atomic_write(flags["final_model"], source.read(), role="model (-f)")


def _spelling(ctx, name: str) -> str:
    for param in ctx.command.params:
        if param.name == name:
            return param.opts[0] if param.param_type_name == "option" else name.upper()
    return name


def _vw_notes(vw_progress, sparse_weights, quiet) -> None:
    """VW options olcli takes without doing what VW does, or with a value VW changes:
    said, never silent."""
    if vw_progress is not None:
        from olcli import vw as vw_spellings

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


# What VW's test mode (-t) under train may be given besides what olcli test takes:
# options about learning, which have nothing to do when nothing is learned (VW
# accepts them too). The others would change the model's features or outputs and
# are refused: the model's own settings apply.
TEST_MODE_ALLOWED = {"ctx", "data", "initial_model", *(row.name for row in rows("train") if row.learning_only),
                     *(name.replace("-", "_") for name in ALGORITHMS), *OPTIONS,
                     *(row.name for row in rows("test"))}
