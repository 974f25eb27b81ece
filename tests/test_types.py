"""mypy finds no error in the package (its settings: pyproject's [tool.mypy])."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.package_tree import REPO, package_tree, run_in_tree

pytestmark = pytest.mark.integration  # mypy runs as a process


def test_mypy_is_clean(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """The cache lives in pytest's cache folder: a cold run takes ~20 s of CPU (most of it torch's stubs),
    a later one only rechecks the package."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[dev]')")
    cache_provider = getattr(pytestconfig, "cache", None)  # absent with -p no:cacheprovider
    cache = cache_provider.mkdir("mypy") if cache_provider is not None else tmp_path / "mypy-cache"
    tree = package_tree(tmp_path / "tree")
    command = ("-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(cache))
    result = run_in_tree(tree, sys.executable, *command, "-p", "gtool")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert result.stdout.startswith("Success: no issues found")
