"""The folder tree is the layering: import-linter's contracts (pyproject) hold."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.support.package_tree import REPO, package_dirs, package_tree, run_in_tree

pytestmark = pytest.mark.integration  # the tools run as processes

CORE_PACKAGE = "gtool/geometry"


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_gtool_links_every_room_so_that_the_tools_see_the_whole_package() -> None:
    rooms = {name.split(".")[1]: folder for name, folder in package_dirs().items() if name.count(".") == 1}
    assert rooms and all((REPO / "gtool" / room).resolve() == folder for room, folder in rooms.items())


def test_import_contracts_hold(tmp_path: Path) -> None:
    result = run_in_tree(package_tree(tmp_path), tool("lint-imports"), str(REPO / "pyproject.toml"))
    assert result.returncode == 0, result.stdout[-4000:]
    assert "0 broken" in result.stdout


def test_a_core_module_importing_a_room_breaks_the_contracts(tmp_path: Path) -> None:
    tree = package_tree(tmp_path)
    linked = tree / CORE_PACKAGE
    source = linked.resolve()
    linked.unlink()
    shutil.copytree(source, linked, ignore=shutil.ignore_patterns("__pycache__"))  # a copy to edit
    with open(linked / "bands.py", "a") as module:
        module.write("\nfrom gtool.trainer.config import TrainConfig  # noqa\n")
    result = run_in_tree(tree, tool("lint-imports"), str(REPO / "pyproject.toml"))
    assert result.returncode != 0
    assert "imports no room BROKEN" in result.stdout
    assert "gtool.geometry.bands -> gtool.trainer.config" in result.stdout


def test_a_room_importing_another_rooms_module_past_its_face_breaks_the_contracts(tmp_path: Path) -> None:
    tree = package_tree(tmp_path)
    linked = tree / "gtool" / "stats"
    source = linked.resolve()
    linked.unlink()
    shutil.copytree(source, linked, ignore=shutil.ignore_patterns("__pycache__"))
    with open(linked / "compare.py", "a") as module:
        module.write("\nfrom gtool.preprocess.permutation import SCHEMES as _SCHEMES  # noqa\n")
    result = run_in_tree(tree, tool("lint-imports"), str(REPO / "pyproject.toml"))
    assert result.returncode != 0
    assert "only through its face, gtool.preprocess (its __init__) BROKEN" in " ".join(result.stdout.split())
    assert "gtool.stats.compare -> gtool.preprocess.permutation" in result.stdout
