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
class Piece:
    """Rows `rows` (local indices) x columns [lo, hi) (local) of a block, exchanged with grid rank `peer`."""

    peer: int
    rows: torch.Tensor
    lo: int
    hi: int

    @property
    def elements(self) -> int:
        return int(self.rows.shape[0]) * (self.hi - self.lo)


@dataclass(frozen=True)
class Moves:
    """One rank's part of a reshard: the pieces of its input block it sends and of its output block it
    fills, per peer in grid order; backward, the gradient of the filled pieces goes back when `returns`
    (coordinate 0 on the output's replica axis) and comes back for the sent pieces in `returned`."""

    sent: list[Piece]
    filled: list[Piece]
    returns: bool
    returned: list[bool]
    size: int
    in_shape: tuple[int, int]
    out_shape: tuple[int, int]

    def splits(self, pieces: list[Piece], keep: list[bool] | None = None) -> list[int]:
        """Elements per grid rank of `pieces` (those `keep` marks), 0 for the others."""
        counts = [0] * self.size
        for index, piece in enumerate(pieces):
            if keep is None or keep[index]:
                counts[piece.peer] = piece.elements
        return counts


def _real_overlap(first: tuple[int, int], second: tuple[int, int]) -> tuple[int, int]:
    return max(first[0], second[0]), min(first[1], second[1])


def _split_by_band(rows: torch.Tensor, band_of: torch.Tensor, bands: int) -> list[torch.Tensor]:
    """`rows` split by their band (`band_of`, each of 0..bands-1), keeping their order within a band."""
    order = torch.sort(band_of, stable=True).indices
    return list(torch.split(rows[order], torch.bincount(band_of, minlength=bands).tolist()))


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
    target_bands = sent.positions[order] // band_size(num_nodes, dims[p2])
    by_target_band = _split_by_band(sent.local[order], target_bands, dims[p2])
    source_bands = filled.positions // band_size(num_nodes, dims[p])
    by_source_band = _split_by_band(filled.local, source_bands, dims[p])
    pieces_sent, pieces_filled, returned = [], [], []
    for peer in range(grid.size):
        other = grid.coords(peer)
        if other[r] != coords[r]:
            continue
        theirs_out = band(other[q2], dims[q2], width)
        lo, hi = _real_overlap((mine_in.start, mine_in.stop), (theirs_out.start, theirs_out.stop))
        if hi > lo:
            rows = by_target_band[other[p2]]
            if rows.numel():
                pieces_sent.append(Piece(peer, rows, lo - in_offset, hi - in_offset))
                returned.append(other[r2] == 0)
        theirs_in = band(other[q], dims[q], width)
        lo, hi = _real_overlap((theirs_in.start, theirs_in.stop), (mine_out.start, mine_out.stop))
        if hi > lo:
            rows = by_source_band[other[p]]
            if rows.numel():
                pieces_filled.append(Piece(peer, rows, lo - out_offset, hi - out_offset))
    return Moves(
        sent=pieces_sent,
        filled=pieces_filled,
        returns=coords[r2] == 0,
        returned=returned,
        size=grid.size,
        in_shape=(in_rows, mine_in.size),
        out_shape=(out_rows, mine_out.size),
    )


def _gathered(block: torch.Tensor, pieces: list[Piece]) -> torch.Tensor:
    parts = [block[piece.rows, piece.lo : piece.hi].reshape(-1) for piece in pieces]
    return torch.cat(parts) if parts else block.new_zeros(0)


def _placed(values: torch.Tensor, into: torch.Tensor, pieces: list[Piece], add: bool) -> torch.Tensor:
    """`into` with the consecutive parts of `values` written (or added) at `pieces`."""
    start = 0
    for piece in pieces:
        part = values[start : start + piece.elements].view(-1, piece.hi - piece.lo)
        start += piece.elements
        if add:
            into[:, piece.lo : piece.hi].index_add_(0, piece.rows, part)
        else:
            into[piece.rows, piece.lo : piece.hi] = part
    return into


class _Reshard(torch.autograd.Function):
    @staticmethod
    def forward(ctx, block, moves, group, replicas):
        ctx.moves, ctx.group, ctx.replicas = moves, group, replicas
        send = _gathered(block, moves.sent)
        received = group.all_to_all(send, moves.splits(moves.sent), moves.splits(moves.filled))
        return _placed(received, block.new_zeros(moves.out_shape), moves.filled, add=False)

    @staticmethod
    def backward(ctx, grad):
        moves = ctx.moves
        back_pieces = moves.filled if moves.returns else []
        sent = _gathered(grad, back_pieces)
        keep = moves.returned
        back = ctx.group.all_to_all(
            sent, moves.splits(back_pieces), moves.splits(moves.sent, keep), count_sent=True
        )
        returned = [piece for piece, kept in zip(moves.sent, keep, strict=True) if kept]
        grad_block = _placed(back, grad.new_zeros(moves.in_shape), returned, add=True)
        return ctx.replicas.all_reduce(grad_block), None, None, None


def reshard(block: torch.Tensor, moves: Moves, group: AxisGroup, replicas: AxisGroup) -> torch.Tensor:
    """`block` in the target layout of `moves` (`group`: the ranks of the grid; `replicas`: the group that
    replicates the input block, over which its gradient is summed)."""
    if tuple(block.shape) != moves.in_shape:
        raise ValueError(f"reshard: a block of shape {tuple(block.shape)}, the moves expect {moves.in_shape}")
    return _Reshard.apply(block, moves, group, replicas)
