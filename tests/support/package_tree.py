"""The import package `gtool` as one folder tree, for tools that find modules by walking folders.

pyproject maps `gtool.preprocess` to preprocess/, `gtool.loader` to loader/ and so on; the installed
package follows that mapping, but import-linter and mypy look for `gtool.X` under the folder of `gtool`.
`package_tree` builds that folder from symbolic links to the repository's own files.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

REPO = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, Path]:
    """pyproject's package -> folder mapping (tool.setuptools.package-dir)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return {name: REPO / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


def package_tree(root: Path) -> Path:
    """Make root/gtool the whole import package (links to the repository's files); returns root."""
    top = root / "gtool"
    top.mkdir(parents=True)
    dirs = package_dirs()
    for entry in dirs["gtool"].iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for name, folder in sorted(dirs.items()):
        parts = name.split(".")
        parent = dirs.get(".".join(parts[:-1]))
        if len(parts) > 1 and parent is not None and folder.parent != parent:
            (top.joinpath(*parts[1:])).symlink_to(folder)
    return root


def run_in_tree(tree: Path, *command: str) -> subprocess.CompletedProcess:
    """Run a tool over the package tree (its folder first on the import path, as its working folder)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MYPYPATH": str(tree)}
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=600)


def main(argv: list[str]) -> int:
    """`python -m tests.support.package_tree TOOL [ARGS]`: run lint-imports or mypy by hand over the
    package tree (a bare `lint-imports` in the repository root finds `gtool/` without its rooms)."""
    import sys
    import tempfile

    if not argv:
        print("usage: python -m tests.support.package_tree lint-imports | mypy -p gtool", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gtool-tree-") as root:
        tool, *args = argv
        config = str(REPO / "pyproject.toml")
        if tool == "lint-imports":
            args = [config, *args]
        if tool == "mypy":
            args = ["--config-file", config, *args]
        result = run_in_tree(package_tree(Path(root)), tool, *args)
        print(result.stdout + result.stderr, end="")
        return result.returncode


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
