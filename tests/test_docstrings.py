"""Module docstrings say what a module is for and why, in at most 8 lines; history, incidents and
measurements belong in docs/ or the commit. A package's map of its modules (`name   what it does`)
may run longer, and every name it lists must be a module or subpackage of that package."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 8
MAP_ENTRY = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*/?) {2,}\S")
"""`name   what it does` or `name/   what it does`: a line of a package's map of its modules."""
MAP_CONTINUATION = re.compile(r"^ {4,}\S")
"""An indented line right after a map entry: that entry, continued."""


def modules() -> list[Path]:
    """Every module of the package, once: gtool/ and the rooms it links (preprocess/, trainer/, ...)."""
    found = set()
    for folder, subfolders, files in os.walk(REPO / "gtool", followlinks=True):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        found.update(Path(folder, name).resolve() for name in files if name.endswith(".py"))
    return sorted(found)


def docstring(module: Path) -> str:
    return ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""


def map_entries(text: str) -> tuple[list[str], list[str]]:
    """A docstring's map entries (the names) and its prose lines (every other line)."""
    names: list[str] = []
    prose: list[str] = []
    in_map = False
    for line in text.splitlines():
        entry = MAP_ENTRY.match(line)
        if entry:
            names.append(entry["name"])
        elif not (in_map and MAP_CONTINUATION.match(line)):
            prose.append(line)
        in_map = bool(entry) or (in_map and bool(MAP_CONTINUATION.match(line)))
    return names, prose


def counted_lines(module: Path) -> list[str]:
    """The lines that count against the limit: a package's map does not, its prose does."""
    text = docstring(module)
    if module.name == "__init__.py":
        return map_entries(text)[1]
    return text.splitlines()


MODULES = modules()
PACKAGES = [
    module for module in MODULES if module.name == "__init__.py" and map_entries(docstring(module))[0]
]


def test_the_walk_finds_every_module_of_every_room_once() -> None:
    rooms = [REPO / "gtool", *(entry for entry in (REPO / "gtool").iterdir() if entry.is_symlink())]
    assert {room.name for room in rooms} >= {
        "gtool",
        "preprocess",
        "loader",
        "trainer",
        "plan",
        "cli",
        "stats",
    }
    files = {path.resolve() for room in rooms for path in room.resolve().rglob("*.py")}
    assert set(MODULES) == files  # each once: by its real path, not also through gtool/'s link
    assert PACKAGES  # the maps are found


@pytest.mark.parametrize("module", MODULES, ids=lambda module: str(module.relative_to(REPO)))
def test_a_module_docstring_has_at_most_8_lines(module: Path) -> None:
    lines = counted_lines(module)
    where = module.relative_to(REPO)
    assert len(lines) <= MAX_LINES, f"{where}: module docstring has {len(lines)} lines (at most {MAX_LINES})"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: str(package.parent.relative_to(REPO)))
def test_every_name_a_package_map_lists_is_its_module_or_subpackage(package: Path) -> None:
    names, _ = map_entries(docstring(package))
    missing = [name for name in names if not is_module_of(package.parent, name)]
    where = package.relative_to(REPO)
    assert not missing, f"{where}: the map lists {missing}, which are not in {package.parent.name}/"


def is_module_of(folder: Path, name: str) -> bool:
    """`name/` is a subpackage of the package in `folder`, `name` one of its modules."""
    if name.endswith("/"):
        return (folder / name / "__init__.py").is_file()
    return (folder / f"{name}.py").is_file()


def test_the_map_reader_counts_only_prose() -> None:
    text = "Title line.\nlayout     array paths\nwriting/   an output\n           continued\n\n    code()\n"
    assert map_entries(text) == (["layout", "writing/"], ["Title line.", "", "    code()"])
