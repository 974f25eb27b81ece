"""docs/python.md runs as written, and again: every ```python block, in order, in one namespace, on the store
the page names (`gtool shard sbm:2000:4 --tiles 4x4 -o graph.zarr`), twice in the same folder."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
import types
from dataclasses import fields
from pathlib import Path

import pytest

from gtool.store.metadata import PermutationInfo
from tests.support.paths import REPO
from tests.support.pyg import FakeData
from tests.support.stores import StoreFactory

PAGE = REPO / "docs" / "python.md"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.S | re.M)


@pytest.fixture
def pyg(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch_geometric, or a fake of its Data class when it is not installed."""
    if importlib.util.find_spec("torch_geometric") is None:
        data = types.ModuleType("torch_geometric.data")
        data.Data = FakeData
        monkeypatch.setitem(sys.modules, "torch_geometric", types.ModuleType("torch_geometric"))
        monkeypatch.setitem(sys.modules, "torch_geometric.data", data)


def test_the_python_page_runs_as_written(
    stores: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pyg: None
) -> None:
    (tmp_path / "graph.zarr").symlink_to(stores("sbm:2000:4", tiles=4))  # the page only reads it
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 6
    for run in (1, 2):  # a second run finds what the first wrote (lattice.zarr)
        namespace: dict[str, object] = {}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for k, block in enumerate(blocks):
                exec(compile(block, f"{PAGE.name} block {k + 1} (run {run})", "exec"), namespace)
        printed = out.getvalue()
        assert "2000 32 4\n4 500\n[0, 1]\n" in printed
        assert "True" in printed and "900" in printed  # verify_store is ok; the lattice has 900 nodes


def test_the_pages_comments_show_what_it_prints_and_what_it_needs() -> None:
    """The PermutationInfo comment lacked the digest; the page said that its examples run as written, but
    to_pyg needs the `pyg` extra, which the README's install does not bring."""
    text = PAGE.read_text()
    comment = re.search(r"print\(store\.meta\.permutation\)\s*#\s*(PermutationInfo\(.*\))", text)
    assert comment is not None
    assert re.findall(r"(\w+)=", comment.group(1)) == [field.name for field in fields(PermutationInfo)]
    before_its_code = text.split("## torch_geometric")[1].split("```python")[0]
    assert '".[dev,pyg]"' in before_its_code and "`pyg` extra" in text.split("\n\n")[1]
