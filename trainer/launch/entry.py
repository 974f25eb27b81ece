"""A rank's entry point named by its module and function, so that a launcher starts ranks without
importing what they run (torch, the model): the function is imported where the entry is called or, sent
to a local launch's supervisor, there, once, before the ranks are forked (`resolved`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """The function `name` of `module`; calling the entry calls it."""

    module: str
    name: str

    def function(self) -> Callable[..., Any]:
        """The function named, imported here."""
        function: Callable[..., Any] = getattr(importlib.import_module(self.module), self.name)
        return function

    def __call__(self, *args: Any) -> Any:
        return self.function()(*args)


def resolved(main: Callable[..., Any]) -> Callable[..., Any]:
    """The function `main` names when it is an Entry (imported here), else `main` itself."""
    return main.function() if isinstance(main, Entry) else main
