"""A residual's reshard: an activation block moved to another layout (roles and node order), one all-to-all.

A block of layout (r, p, q) holds the rows of band p and the columns of band q and is replicated over the
r-axis; the ranks that share an r coordinate (a plane) hold the whole matrix once, so each rank fills its
block of the new layout from its own plane. A row goes to the rank whose new row band holds its position
in the new node order (positions found once per run from the stored permutations, O(N/P) per rank); both
sides order a pair's rows by that position, so only values travel. Backward, one replica of each output
block (coordinate 0 on the new replica axis) sends its gradient back, and the input's replicas sum theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import band, band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import Roles
from gtool.trainer.comm.groups import AxisGroup


@dataclass(frozen=True)
class HeldRows:
    """The real rows a rank's block holds: their `local` indices in the block and each row's `positions`
    in the other layout's node order."""

    local: torch.Tensor
    positions: torch.Tensor


@dataclass(frozen=True)
class Moves:
    """One rank's part of a reshard: flat indices into its input and output blocks, per peer in grid order."""

    send_index: torch.Tensor
    send_splits: list[int]
    receive_index: torch.Tensor
    receive_splits: list[int]
    back_send_index: torch.Tensor
    back_send_splits: list[int]
    back_index: torch.Tensor
    back_splits: list[int]
    in_shape: tuple[int, int]
    out_shape: tuple[int, int]


def _real_overlap(first: tuple[int, int], second: tuple[int, int]) -> tuple[int, int]:
    return max(first[0], second[0]), min(first[1], second[1])


def _flat(rows: torch.Tensor, columns: range, width: int, offset: int) -> torch.Tensor:
    """Flat indices of rows x columns (global columns, the block's first padded column `offset`)."""
    cols = torch.arange(columns.start - offset, columns.stop - offset, device=rows.device)
    return (rows[:, None] * width + cols[None, :]).reshape(-1)


def plan_moves(
    grid: ProcessGrid,
    rank: int,
    source: Roles,
    target: Roles,
    width: int,
    num_nodes: int,
    sent: HeldRows,
    filled: HeldRows,
    in_rows: int,
    out_rows: int,
) -> Moves:
    """This rank's moves of a block whose layout plays `source` (replica axis, row axis, column axis) into
    one that plays `target`: `sent` are its input block's real rows with their positions in the target's
    node order, `filled` its output block's rows with their positions in the source's."""
    dims, coords = grid.dims, grid.coords(rank)
    r, p, q = source
    r2, p2, q2 = target
    mine_in, mine_out = band(coords[q], dims[q], width), band(coords[q2], dims[q2], width)
    in_offset, out_offset = mine_in.index * mine_in.size, mine_out.index * mine_out.size
    order = torch.argsort(sent.positions)
    send_rows, send_bands = sent.local[order], sent.positions[order] // band_size(num_nodes, dims[p2])
    fill_bands = filled.positions // band_size(num_nodes, dims[p])
    send: list[torch.Tensor] = []
    receive: list[torch.Tensor] = []
    back_send: list[torch.Tensor] = []
    back: list[torch.Tensor] = []
    send_splits: list[int] = []
    receive_splits: list[int] = []
    back_send_splits: list[int] = []
    back_splits: list[int] = []
    designated = coords[r2] == 0
    for peer in range(grid.size):
        other = grid.coords(peer)
        if other[r] != coords[r]:
            for splits in (send_splits, receive_splits, back_send_splits, back_splits):
                splits.append(0)
            continue
        theirs_out = band(other[q2], dims[q2], width)
        lo, hi = _real_overlap((mine_in.start, mine_in.stop), (theirs_out.start, theirs_out.stop))
        rows = send_rows[send_bands == other[p2]] if hi > lo else send_rows[:0]
        out = _flat(rows, range(lo, max(lo, hi)), mine_in.size, in_offset)
        send.append(out)
        send_splits.append(out.numel())
        back_splits.append(out.numel() if other[r2] == 0 else 0)
        if other[r2] == 0:
            back.append(out)
        theirs_in = band(other[q], dims[q], width)
        lo, hi = _real_overlap((theirs_in.start, theirs_in.stop), (mine_out.start, mine_out.stop))
        rows = filled.local[fill_bands == other[p]] if hi > lo else filled.local[:0]
        into = _flat(rows, range(lo, max(lo, hi)), mine_out.size, out_offset)
        receive.append(into)
        receive_splits.append(into.numel())
        back_send_splits.append(into.numel() if designated else 0)
        if designated:
            back_send.append(into)
    empty = sent.local.new_zeros(0)
    return Moves(
        send_index=torch.cat(send) if send else empty,
        send_splits=send_splits,
        receive_index=torch.cat(receive) if receive else empty,
        receive_splits=receive_splits,
        back_send_index=torch.cat(back_send) if back_send else empty,
        back_send_splits=back_send_splits,
        back_index=torch.cat(back) if back else empty,
        back_splits=back_splits,
        in_shape=(in_rows, mine_in.size),
        out_shape=(out_rows, mine_out.size),
    )


class _Reshard(torch.autograd.Function):
    @staticmethod
    def forward(ctx, block, moves, group, replicas):
        ctx.moves, ctx.group, ctx.replicas = moves, group, replicas
        received = group.all_to_all(
            block.reshape(-1)[moves.send_index], moves.send_splits, moves.receive_splits
        )
        out = block.new_zeros(moves.out_shape)
        out.view(-1)[moves.receive_index] = received
        return out

    @staticmethod
    def backward(ctx, grad):
        moves = ctx.moves
        sent = grad.reshape(-1)[moves.back_send_index]
        back = ctx.group.all_to_all(sent, moves.back_send_splits, moves.back_splits, count_sent=True)
        grad_block = grad.new_zeros(moves.in_shape)
        grad_block.view(-1).index_add_(0, moves.back_index, back)
        return ctx.replicas.all_reduce(grad_block), None, None, None


def reshard(block: torch.Tensor, moves: Moves, group: AxisGroup, replicas: AxisGroup) -> torch.Tensor:
    """`block` in the target layout of `moves` (`group`: the ranks of the grid; `replicas`: the group that
    replicates the input block, over which its gradient is summed)."""
    if tuple(block.shape) != moves.in_shape:
        raise ValueError(f"reshard: a block of shape {tuple(block.shape)}, the moves expect {moves.in_shape}")
    return _Reshard.apply(block, moves, group, replicas)
