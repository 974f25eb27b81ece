"""docs/howto/own-model.md's user-defined stack (`stack.py`) trains like its serial twin: per-epoch losses
equal (float64, dropout 0) on grids 2x2x2 and 3x2x1 (one spawned world of 8 ranks; N = 2000, which 3 bands do
not divide); with dropout 0.5 every grid equals 1x1x1; and the script runs as written (1x1x1 in this
process), twice in a row."""

from __future__ import annotations

import importlib.util
import re
import runpy
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from gtool.geometry.grid import ProcessGrid
from gtool.store.reader import as_store
from gtool.trainer.comm.groups import GroupCache, build_grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.local import launch_local
from gtool.trainer.models.blocks import CrossEntropy, GCNConv, Linear, Skip
from gtool.trainer.models.grid import Grid
from tests.support.paths import REPO
from tests.support.stores import StoreFactory
from tests.trainer.cases import CPU, joined_world, single_rank_comm

GRIDS = [(2, 2, 2), (3, 2, 1)]
DROPPED = [(1, 1, 1), *GRIDS]
RELATIVE = 1e-5
PAGE = REPO / "docs" / "howto" / "own-model.md"


def write_script(folder: Path) -> Path:
    """The page's `stack.py` block, written to `folder`."""
    (block,) = re.findall(r"^```python title=stack.py\n(.*?)^```$", PAGE.read_text(), flags=re.S | re.M)
    path = folder / "stack.py"
    path.write_text(block)
    return path


def load_script(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("gtool_docs_stack", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _name(shape: tuple[int, int, int], dropout: float) -> str:
    return "x".join(map(str, shape)) + f"-{dropout}.pt"


def _rank(env: RankEnv, script: str, store: str, out: str) -> None:
    """The page's `train` on every grid of GRIDS without dropout and of DROPPED with dropout 0.5, on the
    first ranks of the world; rank 0 of each saves the losses."""
    module = load_script(script)
    made: GroupCache = {}
    with joined_world(env):
        for dropout, shapes in ((0.0, GRIDS), (0.5, DROPPED)):
            module.DROPOUT = dropout
            for shape in shapes:
                comm = build_grid_comm(ProcessGrid(*shape), 120, PhaseTimer(CPU), CPU, made)
                if comm is not None:
                    losses, _ = module.train(Grid(comm, as_store(store), torch.float64, CPU, 0))
                    if comm.rank == 0:
                        torch.save(losses, Path(out) / _name(shape, dropout))


def assert_equal(losses: list[float], serial: list[float]) -> None:
    assert len(losses) == len(serial) >= 3
    for got, want in zip(losses, serial, strict=True):
        assert abs(got - want) <= RELATIVE * abs(want), (losses, serial)


@pytest.fixture
def graph(stores: StoreFactory) -> str:
    return stores("sbm:2000:4", tiles=4)  # the page's store


def test_the_stack_equals_its_serial_twin_and_its_dropout_every_grid(graph: str, tmp_path: Path) -> None:
    script = write_script(tmp_path)
    launch_local(8, _rank, str(script), graph, str(tmp_path))
    serial = load_script(str(script)).serial_losses(graph)
    assert serial[-1] < serial[0]  # it learns
    for shape in GRIDS:
        assert_equal(torch.load(tmp_path / _name(shape, 0.0)), serial)
    alone = torch.load(tmp_path / _name((1, 1, 1), 0.5))
    assert abs(alone[1] - serial[1]) > 1e-3  # the masks drop
    for shape in GRIDS:
        assert_equal(torch.load(tmp_path / _name(shape, 0.5)), alone)


def test_the_script_runs_as_written_twice(
    graph: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), graph, "1x1x1"])
    for _ in range(2):
        runpy.run_path(str(script), run_name="__main__")
        printed = capsys.readouterr().out
        rows = re.findall(r"^epoch \d+ loss (\S+) serial (\S+)$", printed, flags=re.M)
        assert len(rows) >= 3, printed
        assert_equal([float(got) for got, _ in rows], [float(want) for _, want in rows])
        assert re.search(r"^test accuracy 0\.\d{4}$", printed, flags=re.M), printed


def test_blocks_refuse_blocks_of_another_layout(graph: str) -> None:
    grid = Grid(single_rank_comm(), as_store(graph), torch.float64, CPU, 0)
    conv = GCNConv(grid, grid.input, 8)
    with pytest.raises(
        ValueError, match=r"GCNConv: an input block of shape \(2000, 8\), its layout needs \(2000, 32\)"
    ):
        conv(torch.zeros(2000, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="Skip: a block of width 32 cannot join one of width 8"):
        Skip(grid, grid.input, conv.output)
    with pytest.raises(ValueError, match="logits need 4 columns"):
        CrossEntropy(grid, conv.output)
    with pytest.raises(ValueError, match="an initial weight of shape"):
        Linear(grid, conv.output, 4, weight=torch.zeros(4, 8))
