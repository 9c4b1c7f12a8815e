"""MkDocs hook: the pages' generated parts, made at build time so nothing is written twice.

- ``<!-- olcli:commands -->`` becomes the command reference, read from the CLI's own
  Typer definitions (every command, argument and option, its value, default and help).
- ``<!-- olcli:results NAME.md -->`` becomes the tables of ``benchmarks/results/NAME.md``,
  the file a benchmark script wrote.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _command_reference() -> str:
    import typer.main

    from olcli.cli import app
    from olcli.helptext import plain_metavars

    group = typer.main.get_command(app)
    plain_metavars(group)
    out = []
    for name, command in [("olcli", group), *sorted(group.commands.items(), key=lambda kv: 0)]:
        if command.hidden:
            continue
        title = "olcli" if command is group else f"olcli {name}"
        out += [f"## `{title}`", ""]
        if command.help:
            out += [command.help.strip(), ""]
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        usage = f"{title} [OPTIONS]" + "".join(f" [{p.metavar or p.name.upper()}]..." if p.nargs != 1
                                                 else f" {p.metavar or p.name.upper()}" for p in arguments)
        if command is group:
            usage += " COMMAND [ARGS]..."
        out += ["```text", usage, "```", ""]
        panels = {}
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            panel = getattr(param, "rich_help_panel", None) or ("Arguments" if param in arguments else "Options")
            panels.setdefault(panel, []).append(param)
        for panel, params in panels.items():
            out += [f"**{panel}**", "", "| option | value | default | meaning |", "|---|---|---|---|"]
            for param in params:
                names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts]) \
                    if param not in arguments else f"`{param.metavar or param.name.upper()}`"
                value = "" if param in arguments else (param.metavar or "")
                default = param.default
                if hasattr(default, "value"):
                    default = default.value
                shown = "" if default in (None, False, ()) or getattr(param, "show_default", True) is False \
                    else f"`{default}`"
                out.append(f"| {names} | {_cell(value)} | {shown} | {_cell(param.help or '')} |")
            out.append("")
        if command.epilog:
            out += [command.epilog, ""]
    return "\n".join(out)


def _results_tables(name: str) -> str:
    text = (RESULTS / name).read_text(encoding="utf-8")
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    if not tables:
        raise ValueError(f"benchmarks/results/{name} has no table")
    return "\n\n".join("\n".join(t) for t in tables) + f"\n\n(Tables of `benchmarks/results/{name}`.)\n"


def on_page_markdown(markdown, page, config, files):
    if "<!-- olcli:commands -->" in markdown:
        markdown = markdown.replace("<!-- olcli:commands -->", _command_reference())
    return re.sub(r"<!-- olcli:results ([\w.-]+\.md) -->", lambda m: _results_tables(m.group(1)), markdown)
