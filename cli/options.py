"""Command-line flags made from the options' declarations (gtool.options), so each is written once."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import typer

from gtool.options import declared

F = TypeVar("F", bound=Callable[..., Any])


def flag_parameters(section: type, only: Iterable[str] | None = None) -> list[inspect.Parameter]:
    """A Typer option parameter for each option `section` declares (or those named in `only`)."""
    hints = typing.get_type_hints(section)
    wanted = None if only is None else set(only)
    parameters = []
    for field, spec in declared(section):
        if wanted is not None and field.name not in wanted:
            continue
        annotation = hints[field.name]
        if isinstance(annotation, types.UnionType):  # X | None: Typer takes X with a default of None
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        spellings = spec.spellings(field.name)
        if annotation is bool and field.default is not False:  # on by default or decided later: both ways
            spellings[0] = f"{spellings[0]}/--no-{spellings[0][2:]}"
        flag = typer.Option(field.default, *spellings, help=spec.help)
        parameters.append(
            inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=flag, annotation=annotation)
        )
    return parameters


def with_options(*sections: type | tuple[type, Iterable[str]]) -> Callable[[F], F]:
    """The command also takes the options of `sections` (a section, or (section, names) for some of its
    options), as flags made from their declarations; it receives them as keyword arguments."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command)
        kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        for section in sections:
            cls, only = section if isinstance(section, tuple) else (section, None)
            kept += flag_parameters(cls, only)
        command.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
        return command

    return decorate


def given_on_command_line(context: typer.Context, name: str) -> bool:
    """Whether the command's option `name` was given (on the command line or by its environment variable),
    not left at its default."""
    source = context.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"
