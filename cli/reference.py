"""The command-line reference (docs/reference/), written from the commands' own help: one page per command
with every argument and option, its value and its default, so that the reference says what `gtool
COMMAND --help` says. `python -m gtool.cli.reference docs/reference` writes it; a test checks that the
pages in the repository are the ones it writes."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import typer

from .help import default_text, is_argument, option_names, value_name
from .main import app

GENERATED = (
    "<!-- Written by `python -m gtool.cli.reference docs/reference` from the commands' help: do not edit. -->"
)


def cell(text: str) -> str:
    """Text fit for a Markdown table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def parameter_rows(command: Any, ctx: Any) -> tuple[list[str], list[str]]:
    """The table rows of a command's arguments and of its options (--help left out: every command has it)."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        if param.hidden or "--help" in param.opts:
            continue
        if is_argument(param):
            required = "required" if param.required else "optional"
            arguments.append(f"| `{cell(value_name(param))}` | {required} | {cell(param.help or '')} |")
        else:
            default = default_text(param)
            shown = "required" if param.required else (f"`{cell(default)}`" if default is not None else "")
            options.append(f"| `{cell(option_names(param))}` | {shown} | {cell(param.help or '')} |")
    return arguments, options


def command_section(command: Any, ctx: Any) -> list[str]:
    """A command's usage, help text and parameter tables."""
    lines = ["```text", f"{ctx.command_path} {' '.join(command.collect_usage_pieces(ctx))}", "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    arguments, options = parameter_rows(command, ctx)
    if arguments:
        lines += ["| argument | | what it is |", "| --- | --- | --- |", *arguments, ""]
    if options:
        lines += ["| option | default | what it does |", "| --- | --- | --- |", *options, ""]
    return lines


def pages() -> dict[str, str]:
    """Every page of the reference by file name: README.md (the commands), then one per command."""
    group: Any = typer.main.get_command(app)  # a Group: its commands
    root = group.make_context("gtool", [], resilient_parsing=True)
    index = ["# Command-line reference", "", GENERATED, "", inspect.cleandoc(group.help or ""), ""]
    index += ["| command | what it does |", "| --- | --- |"]
    written: dict[str, str] = {}
    for name, command in group.commands.items():
        index.append(f"| [`gtool {name}`]({name}.md) | {cell(command.get_short_help_str(limit=1000))} |")
        ctx = typer.Context(command, info_name=name, parent=root, resilient_parsing=True)
        lines = [f"# `gtool {name}`", "", GENERATED, "", *command_section(command, ctx)]
        for sub_name, sub in getattr(command, "commands", {}).items():
            sub_ctx = typer.Context(sub, info_name=sub_name, parent=ctx, resilient_parsing=True)
            lines += [f"## `gtool {name} {sub_name}`", "", *command_section(sub, sub_ctx)]
        written[f"{name}.md"] = "\n".join(lines).rstrip() + "\n"
    index += ["", "Every command also takes `--help` (its help page); `gtool --version` prints the version."]
    return {"README.md": "\n".join(index) + "\n", **written}


def write(folder: Path) -> None:
    """Write every page into `folder`, and remove pages of commands that no longer exist."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = pages()
    for stale in set(p.name for p in folder.glob("*.md")) - set(wanted):
        (folder / stale).unlink()
    for name, text in wanted.items():
        (folder / name).write_text(text)


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference"))
