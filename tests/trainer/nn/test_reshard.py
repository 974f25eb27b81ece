"""A residual's reshard on a grid of one rank: a row permutation within the block, exact both ways."""

from __future__ import annotations

import pytest
import torch

from gtool.geometry.grid import ProcessGrid
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.reshard import HeldRows, plan_moves, reshard, reshard_start

CPU = torch.device("cpu")


@pytest.mark.parametrize("padding", [0, 3])
def test_one_rank_moves_each_row_to_its_position(padding: int) -> None:
    """Row i of the input lands on row positions[i] of the output (padding rows stay zero), and the
    gradient comes back the same way, with no collective."""
    real, width = 13, 5
    positions = torch.randperm(real, generator=torch.Generator().manual_seed(3))
    held = HeldRows(torch.arange(real), positions)
    back = HeldRows(torch.arange(real), torch.argsort(positions))
    rows = real + padding
    moves = plan_moves(ProcessGrid(1, 1, 1), 0, (0, 1, 2), (2, 0, 1), width, real, held, back, rows, rows)
    assert moves.local is not None and not moves.sent and not moves.filled
    alone = AxisGroup(1, 0, None, PhaseTimer(CPU), CPU)
    block = torch.randn(rows, width, dtype=torch.float64)
    block[real:] = 0
    block.requires_grad_(True)
    moved = reshard(block, moves, alone, alone)
    expected = torch.zeros(rows, width, dtype=torch.float64)
    expected[positions] = block.detach()[:real]
    assert torch.equal(moved, expected)
    upstream = torch.randn(rows, width, dtype=torch.float64)
    moved.backward(upstream)
    expected_grad = torch.zeros(rows, width, dtype=torch.float64)
    expected_grad[:real] = upstream[positions]
    assert block.grad is not None and torch.equal(block.grad, expected_grad)
    assert alone.timer.totals()["reshard"] > 0


def test_a_block_of_another_shape_is_refused() -> None:
    held = HeldRows(torch.arange(4), torch.arange(4))
    moves = plan_moves(ProcessGrid(1, 1, 1), 0, (0, 1, 2), (2, 0, 1), 3, 4, held, held, 4, 4)
    alone = AxisGroup(1, 0, None, PhaseTimer(CPU), CPU)
    with pytest.raises(ValueError, match="the moves expect"):
        reshard_start(torch.zeros(5, 3), moves, alone, alone)
