"""The import package `gtool` as a folder tree of links, for tests that run import-linter or mypy on an
edited copy.

pyproject maps `gtool.preprocess` to preprocess/, `gtool.loader` to loader/ and so on; gtool/ holds links
to those rooms, so that tools that find modules by walking folders (import-linter, mypy) see the whole
package from the repository root.
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
    """Make root/gtool a copy of the import package made of links (gtool/ links its rooms, so the tree is
    whole), for a test to replace one of them with an edited copy; returns root."""
    top = root / "gtool"
    top.mkdir(parents=True)
    for entry in package_dirs()["gtool"].iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    return root


def run_in_tree(tree: Path, *command: str) -> subprocess.CompletedProcess:
    """Run a tool over the package tree (its folder first on the import path, as its working folder)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "MYPYPATH": str(tree)}
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=600)
