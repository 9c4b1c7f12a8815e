"""olcli train and olcli test read straight from the table of settings, without typer.

Most runs of olcli are a plain ``olcli train FILE ...`` or ``olcli test FILE -i MODEL``:
building typer's command (importing typer, click and rich, and ~300 click options)
costs about as much as the rest of olcli's start-up on top of Python and NumPy. This
module reads such a line with the options the typer command is made of
(olcli/cli_options.py: ``settings.TRAIN_OPTIONS``, the algorithms' flags and
hyper-parameters of engine/registry.py, the settings' own rows), gives each option the
value typer would give it, and calls the same body (``cli_options.run_train``, ``run_test``).

It reads only what it fully understands, and hands everything else to the typer app
unchanged, so that output and exit codes are typer's: ``--help`` anywhere, an unknown
or repeated option, a value that is not a plain number, choice or UTF-8 text (typer
refuses it, or coerces ``nan`` and ``1_000``), a number below an option's minimum, a
missing value or ``-i``, ``--``, VW's test mode (``-t``), contextual bandits, shell
completion, any command but train and test. ``olcli vw`` with a contextual-bandit line
is run here too (``cb_line``): typer's command only hands it to olcli/cb_run.py. VW's
spellings are rewritten first, as the typer command does (olcli/vw.py ``rewrite``). ``OLCLI_FAST_PATH=0`` sends every line to
typer (to compare; tests/test_fastpath.py runs lines both ways).

The run is wrapped as typer's ``main`` wraps a command: a KeyboardInterrupt exits 130,
EOFError is "Aborted!" (exit 1), a broken stdout pipe exits 1 with click's pacifying
wrappers (``cli.main`` turns that into 141).
"""

import errno
import os
import sys

from olcli import cli_options, settings, startup
from olcli.engine.registry import ALGORITHMS, OPTIONS

COMMANDS = ("train", "test")
_PLAIN = {"int": int, "int|null": int, "number": float, "number|null": float, "str|null": str}
_specs: dict = {}


class Spec:
    """One command's options as typer makes them: ``options`` (spelling -> (name, given,
    convert, many, minimum), ``given`` the value of a flag and None for an option taking
    a value), ``defaults`` (name -> typer's value when not given) and ``known`` (what
    ``vw.rewrite`` is told about the command: olcli/cli_app.py ``_known_options``)."""

    def __init__(self, command: str):
        self.options, self.defaults, self.choices = {}, {}, {}
        if command == "test":
            self._add("initial_model", ("-i", "--initial-model"), None, str, "", None, required=True)
        table = cli_options.rows(command)
        placed = len(settings.TRAIN_OPTIONS) if command == "train" else len(table)
        for row in table[:placed]:
            self._row(row)
        if command == "train":
            for algorithm in ALGORITHMS.values():
                self._add(algorithm.name.replace("-", "_"), (f"--{algorithm.name}",), True, None, "", False)
            for name, option in OPTIONS.items():
                self._add(name, option.flags, True if option.switch else None, float, "",
                          False if option.switch else None)
            for row in table[placed:]:
                self._row(row)

    def _add(self, name, flags, given, convert, many, default, minimum=None, choices=None, required=False):
        for flag in flags:
            self.options[flag] = (name, given, convert, many, minimum)
            if choices:
                self.choices[flag] = list(choices)
        if not required:
            self.defaults[name] = default

    def _row(self, row) -> None:
        """cli_options._option's typer option of one row."""
        flags = tuple(spelled for flag in row.flags for spelled in flag.split("/"))
        if row.switch:   # --strict/--skip-bad-lines: the second spelling gives False
            for number, flag in enumerate(flags):
                self._add(row.name, (flag,), number == 0, None, "", False)
            return
        if row.many:
            self._add(row.name, flags, None, str, row.many, None)
            return
        convert = row.choices or _PLAIN[row.kind]
        if row.cli_default is not None:
            default = row.cli_default if row.choices else _PLAIN[row.kind](row.cli_default)
        else:
            shown = row.stored is None and row.default not in (None, 0)
            default = row.default if shown else None
        self._add(row.name, flags, None, convert, "", default, row.minimum, row.choices)

    def known(self):
        """The command's spellings for ``vw.rewrite`` (spelling -> takes a value; choices)."""
        from olcli import vw

        options = {flag: given is None for flag, (_, given, *_) in self.options.items()}
        options["--help"] = False
        return vw.Known(options, self.choices)


def spec(command: str) -> Spec:
    if command not in _specs:
        _specs[command] = Spec(command)
    return _specs[command]


def _value(convert, minimum, text: str):
    """typer's value of one option's text (olcli/startup.py's plain spellings), or None
    when typer should decide (a refusal, or a spelling only typer coerces)."""
    if type(convert) is tuple:   # a choice: exactly one of its values
        return text if text in convert else None
    if convert is str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return text
    pattern = startup._INTEGER if convert is int else startup._DECIMAL
    if not pattern.fullmatch(text):
        return None
    number = convert(text)
    return None if minimum is not None and number < minimum else number


def parse(args: list):
    """(command, data, flags) of a line this module reads as typer would, else None."""
    if args[:1] == ["--traceback"]:
        args = args[1:]
    if not args or args[0] not in COMMANDS or "--help" in args or "_OLCLI_COMPLETE" in os.environ:
        return None
    command, words = args[0], args[1:]
    from olcli import vw

    if command == "train" and vw.is_cb_line(words):
        return None
    table = spec(command)
    try:
        words = vw.rewrite(list(words), table.known(), command)
    except Exception:   # a refused VW option: typer's command says so
        return None
    data, flags = [], {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "-" or not word.startswith("-"):
            if _value(str, None, word) is None:
                return None
            data.append(word)
            continue
        if word.startswith("--"):
            name, equals, attached = word.partition("=")
            attached = attached if equals else None
        else:
            name, attached = word[:2], word[2:] or None
        option = table.options.get(name)
        if option is None:   # "--", an unknown option: typer's message
            return None
        key, given, convert, many, minimum = option
        if given is not None:
            if attached is not None:
                return None
            value = given
        else:
            if attached is None:
                if i >= len(words):
                    return None
                attached = words[i]
                i += 1
            value = _value(convert, minimum, attached)
            if value is None:
                return None
        if many:
            flags.setdefault(key, []).append(value)
        elif key in flags:
            return None
        else:
            flags[key] = value
    if command == "test" and "initial_model" not in flags:
        return None
    if flags.get("testonly"):   # VW's -t: cli._test_only reads click's context
        return None
    return command, data or None, {**table.defaults, **flags}


def cb_line(args: list):
    """The VW words of ``olcli vw WORDS`` when they are a contextual-bandit line (``--cb``,
    ``--cb_adf``, ``--cb_explore_adf``; ``--cbify`` with one of them), which the typer command
    hands whole to olcli/cb_run.py, else None: help (``-h``, ``--help``, ``--help=...``, a
    cluster of short flags with an ``h``), ``--``, ``-i`` (the typer command first reads the
    model's reduction), shell completion, or a word that is not UTF-8 text stay typer's."""
    if args[:1] == ["--traceback"]:
        args = args[1:]
    if args[:1] != ["vw"] or len(args) < 2 or "_OLCLI_COMPLETE" in os.environ:
        return None
    words = args[1:]
    for word in words:
        if (word in ("--help", "--", "-i") or word.startswith(("--help=", "--initial_regressor"))
                or _value(str, None, word) is None):
            return None
        if word.startswith("-") and not word.startswith("--") and "h" in word[1:]:
            return None
    from olcli import vw

    return words if vw.is_cb_line(words) else None


def run(args: list, command_process: bool = False) -> bool:
    """Run ``args`` (the words after ``olcli``) when this module reads them; False when
    they are typer's to run."""
    if os.environ.get("OLCLI_FAST_PATH", "").strip() == "0":
        return False
    if command_process:
        startup.defer_collection()
    try:
        words = cb_line(args)
        if words is not None:
            from olcli import cb_run

            startup._state["command"] = bool(command_process)
            return _as_typer(cb_run.run, words)
        parsed = parse(args)
        if parsed is None:
            return False
        command, data, flags = parsed
        startup._state["command"] = bool(command_process)
        if command == "train":
            return _as_typer(cli_options.run_train, None, data, flags)
        return _as_typer(cli_options.run_test, data, flags.pop("initial_model"), flags)
    finally:
        startup.resume_collection()   # (the commands resume it before their data: startup.prepare_kernels)


def _as_typer(body, *args) -> bool:
    """``body(*args)`` wrapped as typer's ``main`` wraps a command (the module's docstring)."""
    try:
        body(*args)
    except KeyboardInterrupt:
        sys.exit(130)
    except EOFError:
        _aborted()
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        from typer import _click   # typer's own copy of click

        sys.stdout = _click.utils.PacifyFlushWrapper(sys.stdout)
        sys.stderr = _click.utils.PacifyFlushWrapper(sys.stderr)
        sys.exit(1)
    return True


def _aborted() -> None:
    """typer's answer to EOFError in a command: an empty line, then "Aborted!" (exit 1)."""
    from typer import _click, core

    _click.echo(file=sys.stderr)
    if core.HAS_RICH and core.DEFAULT_MARKUP_MODE is not None:
        from typer import rich_utils

        rich_utils.rich_abort_error()
    else:
        _click.echo("Aborted!", file=sys.stderr)
    sys.exit(1)
