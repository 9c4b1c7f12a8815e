"""--help's value labels: INT, FLOAT, PATH, TEXT or [a|b|c] instead of click's <int>, <str>.

Applied to the command before it parses (olcli/startup.py) and by the docs' command
reference (docs/hooks/generate.py).
"""

from enum import Enum


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
