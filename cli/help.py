"""Help pages and command-line mistakes as a conventional command line writes them.

`Usage: gtool shard [OPTIONS] SOURCE`; a value named in capitals (--tiles TxT, --seed INTEGER), a switch
with none (--directed, --x/--no-x), defaults shown, the text wrapped at the terminal's width; a mistyped
command line is one `error:` line naming the flag, exit status 2, as any other refusal.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from .common import print_error
from .options import TYPE_METAVARS

try:  # typer vendors click from 0.20 on
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older typer runs on click
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]

WIDTH = 10_000
"""No cap on the help page's width: it takes the terminal's ($COLUMNS where set), less a margin."""


def value_name(param: Any) -> str:
    """What the help calls a parameter's value: its metavar, else an argument's name and an option's type
    in capitals."""
    if param.metavar:
        return str(param.metavar)
    if is_argument(param):
        return str(param.name).upper()
    annotation: Any = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return TYPE_METAVARS.get(annotation) or str(getattr(getattr(param, "type", None), "name", "text")).upper()


def is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """[OPTIONS] and the arguments by name (SOURCE; [STORE] when it may be left out)."""
    pieces = ["[OPTIONS]"]
    for param in command.get_params(ctx):
        if is_argument(param):
            name = value_name(param) + ("..." if param.nargs != 1 else "")
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def option_names(param: Any) -> str:
    """'-t, --tiles TxT', '--directed', '--fused/--no-fused'."""
    names = ", ".join(sorted(param.opts, key=lambda name: (name.startswith("--"), name)))
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
        names += " " + value_name(param)
    return names


def default_text(param: Any) -> str | None:
    """The default as the help shows it: the declared text, else the value (a switch off by default and a
    value decided later show none)."""
    if isinstance(param.show_default, str):
        return param.show_default
    default = param.default
    if default is None or param.show_default is False or callable(default):
        return None
    if isinstance(default, bool):
        return None if not default or param.secondary_opts else "on"
    return str(default)


def help_text(param: Any) -> str:
    text = param.help or ""
    extras = []
    if (default := default_text(param)) is not None:
        extras.append(f"default: {default}")
    if param.required and not is_argument(param):
        extras.append("required")
    return f"{text}  [{'; '.join(extras)}]" if extras else text


def write_rows(formatter: Any, rows: list[tuple[str, str]], widest: int = 30, gap: int = 2) -> None:
    """Two columns, the second wrapped at the page's width between words (never inside a word such as
    sbm-multi or a path); a first column wider than `widest` puts its text on the next line."""
    first = min(max(len(name) for name, _ in rows), widest)
    indent = formatter.current_indent
    column = indent + first + gap
    wrapper = textwrap.TextWrapper(
        width=max(formatter.width - column, 20), break_on_hyphens=False, break_long_words=False
    )
    for name, text in rows:
        lines = wrapper.wrap(text) or [""]
        if len(name) <= first:
            formatter.write(f"{'':>{indent}}{name:<{first + gap}}{lines[0]}\n")
            lines = lines[1:]
        else:
            formatter.write(f"{'':>{indent}}{name}\n")
        for line in lines:
            formatter.write(f"{'':>{column}}{line}\n")


def write_parameters(command: Any, ctx: Any, formatter: Any) -> None:
    """The Arguments and Options sections of a help page."""
    params = command.get_params(ctx)
    arguments = [(value_name(p), help_text(p)) for p in params if is_argument(p) and not p.hidden]
    options = [(option_names(p), help_text(p)) for p in params if not is_argument(p) and not p.hidden]
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                write_rows(formatter, rows)


class CommandLineError(ClickException):
    """A mistyped command line, said in one `error:` line."""

    exit_code = 2

    def __init__(self, message: str, command_path: str | None):
        super().__init__(message)
        self.command_path = command_path

    def show(self, file: Any = None) -> None:
        hint = f" (see {self.command_path} --help)" if self.command_path else ""
        print_error(self.message + hint)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Usage errors (bad value, unknown option, missing argument) as a CommandLineError; those that show
    something else (a help page for no arguments) as they are."""
    try:
        yield
    except UsageError as error:
        if type(error).show is not UsageError.show:
            raise
        path = error.ctx.command_path if error.ctx is not None else None
        raise CommandLineError(error.format_message(), path) from None


class Command(TyperCommand):
    """A command whose help page is written conventionally."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)


class Group(TyperGroup):
    """A group of commands whose help page is written conventionally and whose command-line mistakes are
    one `error:` line."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*usage_pieces(self, ctx), self.subcommand_metavar or "COMMAND [ARGS]..."]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with one_line_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


class App(typer.Typer):
    """A Typer application whose commands and groups are the ones above."""

    def __init__(self, **kwargs: Any):
        super().__init__(
            cls=Group,
            rich_markup_mode=None,
            context_settings={"max_content_width": WIDTH, "help_option_names": ["-h", "--help"]},
            pretty_exceptions_enable=False,
            add_completion=False,
            **kwargs,
        )

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)
