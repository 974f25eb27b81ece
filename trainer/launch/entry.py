"""A rank's entry point named by its module and function, so that a launcher starts ranks without
importing what they run (torch, the model): the function is imported where the entry is called or, sent
to a local launch's supervisor, there, once, before the ranks are forked (`resolved`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def entry_function(module: str, name: str) -> Callable[..., Any]:
    """The function `name` of `module`, imported."""
    function: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return function


@dataclass(frozen=True)
class Entry:
    """The function `name` of `module`; calling the entry calls it."""

    module: str
    name: str

    def __call__(self, *args: Any) -> Any:
        return entry_function(self.module, self.name)(*args)


def resolved(main: Callable[..., Any]) -> Callable[..., Any]:
    """The function `main` names when it is an Entry (imported here), else `main` itself."""
    return entry_function(main.module, main.name) if isinstance(main, Entry) else main
