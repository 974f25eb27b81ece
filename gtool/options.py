"""Options declared once: a dataclass field carries its default, its help and its constraints.

The configurations of a run (gtool.architecture.ModelConfig, gtool.trainer.config's) declare each option
as `option(default, help, ...)`: the command line builds its flags from them (gtool.cli.options) and
`check_options` validates them in one place, naming the flag. In a frozen dataclass:

    class ModelConfig(Options):
        hidden: int = option(128, "Width of the hidden layers.", minimum=1)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    """What the command line and the validation need to know of one field."""

    help: str
    flag: str | None = None
    """The flag's spelling when it is not --field-name (e.g. --optimizer for `algorithm`)."""
    short: str | None = None
    """A one-letter spelling as well (e.g. -l)."""
    aliases: tuple[str, ...] = ()
    """Other spellings the flag answers to (older ones, or one that passes through a launcher)."""
    minimum: float | None = None
    below: float | None = None
    """An exclusive upper bound."""
    choices: tuple[str, ...] | None = None
    positive: bool = False
    """The value must be greater than 0."""
    nonblank: bool = False
    """A text value must not be empty or blank (an unset variable, most likely)."""
    parse: Callable[[str, str], Any] | None = None
    """How the flag's text becomes the value, given (text, flag) (e.g. '16x16' -> 16); ValueError if it
    cannot. Without it the flag takes the field's type."""
    metavar: str | None = None
    """The value's name in the help (e.g. SIZE); default: from the field's type."""
    shown_default: str | None = None
    """The default as the help shows it, when not the field's default (e.g. 'half of this machine')."""

    def flag_of(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")

    def spellings(self, name: str) -> list[str]:
        """Every spelling of the flag: the long one, the short one if any, then the aliases."""
        return [self.flag_of(name)] + ([self.short] if self.short else []) + list(self.aliases)

    def problem(self, name: str, value: Any) -> str | None:
        """What is wrong with `value` for this option, or None."""
        if value is None or isinstance(value, bool):
            return None
        flag = self.flag_of(name)
        if self.nonblank and isinstance(value, str) and not value.strip():
            return f"{flag} is empty: give a value, or leave the option out for the default"
        if self.choices is not None and value not in self.choices:
            return f"{flag} must be one of {', '.join(self.choices)}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{flag} must be a finite number, got {value}"  # nan passes every bound
        low = self.minimum is not None and value < self.minimum
        high = self.below is not None and value >= self.below
        if (low or high) and self.minimum is not None and self.below is not None:
            return f"{flag} must be in [{self.minimum:g}, {self.below:g}), got {value}"
        if low:
            return f"{flag} must be >= {self.minimum:g}, got {value}"
        if high:
            return f"{flag} must be below {self.below:g}, got {value}"
        if self.positive and value <= 0:
            return f"{flag} must be > 0, got {value}"
        return None


def option(default: Any, help: str, **constraints: Any) -> Any:
    """A dataclass field declared as an option (see `Option` for the constraints)."""
    return dataclasses.field(default=default, metadata={"option": Option(help, **constraints)})


def declared(cls: type) -> list[tuple[dataclasses.Field, Option]]:
    """The fields of a dataclass that are declared as options, in order."""
    return [(f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata]


def check_options(instance: Any) -> list[str]:
    """Every problem of the declared options of a dataclass instance, in declaration order."""
    problems = []
    for f, spec in declared(type(instance)):
        problem = spec.problem(f.name, getattr(instance, f.name))
        if problem:
            problems.append(problem)
    return problems


class Options:
    """Base of a frozen dataclass of options: refuses bad values when made (ValueError naming the flags).

    A subclass adds checks that involve several options in `combined_problems`."""

    def __post_init__(self) -> None:
        problems = check_options(self) + self.combined_problems()
        if problems:
            raise ValueError("; ".join(problems))

    def combined_problems(self) -> list[str]:
        return []


def route(sections: dict[str, type], options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Options given by name, routed to the section that declares each: {section: {name: value}} (every
    section present, empty when none of its options is given); unknown names are refused."""
    routed: dict[str, dict[str, Any]] = {name: {} for name in sections}
    owner = {f.name: section for section, cls in sections.items() for f, _ in declared(cls)}
    for name, value in options.items():
        if name not in owner:
            raise TypeError(f"no option named {name!r} (options: {', '.join(sorted(owner))})")
        routed[owner[name]][name] = value
    return routed


def build_sections(sections: dict[str, type], routed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each section made from its routed options; the problems of all of them in one ValueError."""
    built, problems = {}, []
    for name, values in routed.items():
        try:
            built[name] = sections[name](**values)
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise ValueError("; ".join(problems))
    return built
