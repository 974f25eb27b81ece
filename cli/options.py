"""Command-line flags made from the options' declarations (gtool.options), so each is written once."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import typer

from gtool.errors import GtoolError
from gtool.options import Option, declared

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S")

TYPE_METAVARS = {int: "INTEGER", float: "FLOAT", str: "TEXT"}
"""The value's name in the help by the field's type, as click names them."""


def value_type(section: type, field: dataclasses.Field) -> Any:
    """The field's type, without its `| None`."""
    annotation = typing.get_type_hints(section)[field.name]
    if isinstance(annotation, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


def metavar(spec: Option, annotation: Any) -> str:
    """What the help calls the flag's value: the declared name, the choices, else the type's name."""
    if spec.metavar:
        return spec.metavar
    if spec.choices:
        return "[" + "|".join(spec.choices) + "]"
    return TYPE_METAVARS.get(annotation, "TEXT")


def flag(section: type, field: dataclasses.Field, spec: Option) -> inspect.Parameter:
    """The Typer option of one declared field: a switch for a bool (--x/--no-x when it is on by default or
    its default is None, decided later), else a flag taking a value (text for a declaration that parses
    it)."""
    annotation = value_type(section, field)
    spellings = spec.spellings(field.name)
    shown: dict[str, Any] = {"show_default": spec.shown_default} if spec.shown_default else {}
    if annotation is bool:
        if field.default is not False:  # on by default, or decided later: both ways
            no = "--no-" + spellings[0].removeprefix("--")
            spellings = [f"{spellings[0]}/{no}", *spellings[1:]]
        option = typer.Option(field.default, *spellings, help=spec.help, **shown)
    else:
        default = None if spec.parse else field.default
        annotation = str if spec.parse else annotation
        option = typer.Option(default, *spellings, help=spec.help, metavar=metavar(spec, annotation), **shown)
    return inspect.Parameter(
        field.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


def flag_parameters(section: type, only: Iterable[str] | None = None) -> list[inspect.Parameter]:
    """A Typer option parameter for each option `section` declares (or those named in `only`)."""
    wanted = None if only is None else set(only)
    return [flag(section, f, spec) for f, spec in declared(section) if wanted is None or f.name in wanted]


def parsed(sections: Iterable[type], values: dict[str, Any]) -> dict[str, Any]:
    """The flags' values with the text of declarations that parse it turned into their values (a flag
    left out is dropped, so that the field keeps its default); a value that does not parse is a
    GtoolError naming the flag."""
    parsers = {f.name: spec for section in sections for f, spec in declared(section) if spec.parse}
    result = {}
    for name, value in values.items():
        spec = parsers.get(name)
        if spec is None or spec.parse is None:
            result[name] = value
        elif value is not None:
            try:
                result[name] = spec.parse(value, spec.flag_of(name))
            except ValueError as error:
                raise GtoolError(str(error)) from None
    return result


def with_options(*sections: type | tuple[type, Iterable[str]]) -> Callable[[F], F]:
    """The command also takes the options of `sections` (a section, or (section, names) for some of its
    options), as flags made from their declarations; it receives them as keyword arguments, parsed."""
    classes = [section[0] if isinstance(section, tuple) else section for section in sections]

    def decorate(command: F) -> F:
        signature = inspect.signature(command)
        kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        for section in sections:
            cls, only = section if isinstance(section, tuple) else (section, None)
            kept += flag_parameters(cls, only)

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return command(*args, **parsed(classes, kwargs))

        wrapper.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def made(section: Callable[..., S], **values: Any) -> S:
    """`section(**values)`, its refusal of bad values a GtoolError (one line naming the flags)."""
    try:
        return section(**values)
    except ValueError as error:
        raise GtoolError(str(error)) from None


def given_on_command_line(context: typer.Context, name: str) -> bool:
    """Whether the command's option `name` was given (on the command line or by its environment variable),
    not left at its default."""
    source = context.get_parameter_source(name)
    return source is not None and source.name != "DEFAULT"
