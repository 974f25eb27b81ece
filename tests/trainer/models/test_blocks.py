"""The blocks refuse what does not fit their layout: an input block of another shape, a skip between
widths, logits of another width than the store's classes, an initial weight of another shape."""

from __future__ import annotations

import pytest
import torch

from gtool.store.reader import as_store
from gtool.trainer.models.blocks import CrossEntropy, GCNConv, Linear, Skip
from gtool.trainer.models.grid import Grid
from tests.support.stores import StoreFactory
from tests.trainer.cases import CPU, single_rank_comm


@pytest.fixture
def graph(stores: StoreFactory) -> str:
    return stores("sbm:2000:4", tiles=4)


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
