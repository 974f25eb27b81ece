"""README.md, docs/*.md and the package's code name no path outside the repository: a user's clone has
nothing beside it.

The rule, precisely:
- no `../shared` (any letter case), and no relative path starting with `../` that, resolved from the
  file's own folder, leaves the repository;
- no absolute machine path: a path token that starts with `/` (at the start of a line, after whitespace,
  a quote, a backtick, `(`, `[`, `=` or `<`), with `file://`, or with a drive letter (`C:\\`), unless it
  starts with one of the generic placeholders GENERIC (cluster file systems in examples: `/data/ogb`,
  `/shared/graph.zarr`, `/scratch/...`). URLs (`https://...`, `s3://...`, `tcp://...`) are not paths.
The package's code (docstrings, comments and strings alike) may also name the operating system's own
files (SYSTEM: `/proc/...`, `/sys/...`, `/dev/...`), which every Linux machine has.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

GENERIC = ("/data/", "/shared/", "/scratch/")
SYSTEM = ("/proc/", "/sys/", "/dev/")
ABSOLUTE = re.compile(
    r"(?:^|(?<=[\s`'\"(\[=<]))(?:file://)?(/[\w.~-][^\s`'\")\]>,;]*)|\b([A-Za-z]:\\[^\s`'\"]*)", re.M
)
CLIMBING = re.compile(r"(?:^|(?<=[\s`'\"(\[=<]))((?:\.\./)+[^\s`'\")\]>,;]*)", re.M)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def modules() -> list[Path]:
    """Every module of the package (the folders of pyproject's package-dir)."""
    from tests.support.package_tree import package_dirs  # here: it skips without tomllib (Python 3.10)

    return sorted({module for folder in package_dirs().values() for module in folder.rglob("*.py")})


def outside_paths(text: str, folder: Path, allowed: tuple[str, ...] = GENERIC) -> list[str]:
    """Every path in `text` (a page in `folder`) that names something outside the repository, apart from
    absolute paths starting with one of `allowed`."""
    found = [m.group(0) for m in re.finditer(r"\.\./shared", text, flags=re.I)]
    for match in ABSOLUTE.finditer(text):
        path = match.group(1) or match.group(2)
        if not path.startswith(allowed):
            found.append(path)
    for match in CLIMBING.finditer(text):
        target = (folder / match.group(1)).resolve()
        if not target.is_relative_to(REPO.resolve()):
            found.append(match.group(1))
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_pages_name_no_path_outside_the_repository(page: Path) -> None:
    assert outside_paths(page.read_text(), page.parent) == []


def test_code_names_no_path_outside_the_repository() -> None:
    found = {
        module.relative_to(REPO).as_posix(): paths
        for module in modules()
        if (paths := outside_paths(module.read_text(), module.parent, GENERIC + SYSTEM))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("gtool shard ../shared/datasets/planetoid/cora", ["../shared"]),
        ("see `../../other/docs.md`", ["../../other/docs.md"]),
        ("gtool shard /work/shared/datasets/cora -o x", ["/work/shared/datasets/cora"]),
        ("(/home/me/graph.zarr)", ["/home/me/graph.zarr"]),
        ("--spill-dir=/tmp/spill", ["/tmp/spill"]),
        ("file:///Users/me/g.zarr", ["/Users/me/g.zarr"]),
        ("C:\\Users\\me\\g.zarr", ["C:\\Users\\me\\g.zarr"]),
        ("--root /data/ogb -o /shared/graph.zarr", []),
        ("[the format](store-format.md), [readme](../README.md), https://zarr.dev/x, s3://b/g.zarr", []),
        ("D^-1/2 (A+I) D^-1/2, max/mean, 1/G_a, a / b", []),
    ],
)
def test_the_rule(text: str, found: list[str]) -> None:
    assert outside_paths(text, REPO / "docs") == found
