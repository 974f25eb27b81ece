"""A room's face: its `__init__` names what other rooms may use in an `if TYPE_CHECKING:` block of
imports, and `face(__name__)` looks each name up in its module when it is asked for, so that importing a
face costs nothing (a command loads only what it touches) while mypy and import-linter see real imports.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _exports(source: str) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) of every absolute import in the top-level `if TYPE_CHECKING:` blocks."""
    exports = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                    for alias in statement.names:
                        exports[alias.asname or alias.name] = (statement.module, alias.name)
    return exports


def face(name: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of package `name` (a face, see above)."""
    package = sys.modules[name]
    exports = _exports(Path(str(package.__file__)).read_text(encoding="utf-8"))

    def getattr_(attribute: str) -> Any:
        if attribute not in exports:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        module, real = exports[attribute]
        return getattr(importlib.import_module(module), real)  # not cached: the module's own, even patched

    def dir_() -> list[str]:
        return sorted({*vars(package), *exports})

    return getattr_, dir_
