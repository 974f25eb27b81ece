"""A residual's reshard: an activation block moved to another layout (roles and node order), one all-to-all.

A block of layout (r, p, q) holds rows of band p and columns of band q, replicated over the r-axis; each
rank fills its block of the new layout from its own plane (the ranks sharing its r coordinate). A row goes
to the rank whose new row band holds its position in the new node order; both sides order a pair's rows
by it, so only values travel; backward, one replica of each output block sends its gradient back. One
rank: a cached row permutation (`LocalMove`). Elsewhere `reshard_start` begins the all-to-all and
`Resharding.wait` ends it, so a layer computes while its residual travels (timed as "reshard").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import band, band_size
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import Roles
from gtool.trainer.comm.groups import AxisGroup, Pending


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
class LocalMove:
    """A reshard within one rank: input rows `sources` land on output rows `targets`, in that order. When
    they are every row of both blocks (a `permutation`), they are kept as gather indices instead:
    `sources[i]` is output row i's input row and `targets[j]` input row j's output row, so that each way
    is one index_select and nothing is zero-filled."""

    sources: torch.Tensor
    targets: torch.Tensor
    permutation: bool

    @staticmethod
    def of(sent: torch.Tensor, filled: torch.Tensor, in_rows: int, out_rows: int) -> LocalMove:
        if sent.numel() != in_rows or filled.numel() != out_rows:
            return LocalMove(sent, filled, False)
        sources, targets = torch.empty_like(filled), torch.empty_like(sent)
        sources[filled] = sent
        targets[sent] = filled
        return LocalMove(sources, targets, True)

    def forward(self, block: torch.Tensor, out_shape: tuple[int, int]) -> torch.Tensor:
        if self.permutation:
            return block.index_select(0, self.sources)
        return block.new_zeros(out_shape).index_copy_(0, self.targets, block.index_select(0, self.sources))

    def backward(self, grad: torch.Tensor, in_shape: tuple[int, int]) -> torch.Tensor:
        if self.permutation:
            return grad.index_select(0, self.targets)
        return grad.new_zeros(in_shape).index_copy_(0, self.sources, grad.index_select(0, self.targets))


@dataclass(frozen=True)
class Moves:
    """One rank's part of a reshard: the pieces of its input block it sends and of its output block it
    fills, per peer in grid order; backward, the gradient of the filled pieces goes back when `returns`
    (coordinate 0 on the output's replica axis) and comes back for the sent pieces in `returned`. On a
    grid of one rank `local` holds the move instead of the pieces."""

    sent: list[Piece]
    filled: list[Piece]
    returns: bool
    returned: list[bool]
    size: int
    in_shape: tuple[int, int]
    out_shape: tuple[int, int]
    local: LocalMove | None = None

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
    in_shape, out_shape = (in_rows, mine_in.size), (out_rows, mine_out.size)
    if grid.size == 1:  # its one peer is itself, and both blocks hold every column
        sent_rows, filled_rows = (ps[0].rows if ps else sent.local[:0] for ps in (pieces_sent, pieces_filled))
        local = LocalMove.of(sent_rows, filled_rows, in_rows, out_rows)
        return Moves([], [], True, [], 1, in_shape, out_shape, local)
    return Moves(
        sent=pieces_sent,
        filled=pieces_filled,
        returns=coords[r2] == 0,
        returned=returned,
        size=grid.size,
        in_shape=in_shape,
        out_shape=out_shape,
    )


def _gathered(block: torch.Tensor, pieces: list[Piece]) -> torch.Tensor:
    parts = [block[piece.rows, piece.lo : piece.hi].reshape(-1) for piece in pieces]
    if len(parts) == 1:
        return parts[0]
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


class _Flight:
    """One reshard's collectives in flight between its two autograd functions: forward, the values sent
    and the buffer they arrive in; backward, the gradient's."""

    def __init__(self, moves: Moves, group: AxisGroup, replicas: AxisGroup):
        self.moves, self.group, self.replicas = moves, group, replicas
        self.forward: tuple[Pending, torch.Tensor] | None = None
        self.backward: tuple[Pending, torch.Tensor] | None = None


class _Send(torch.autograd.Function):
    """Forward: start sending the input block's pieces; its output is an empty token that orders
    `_Receive` after it. Backward: wait for the gradient's pieces and sum them over the replicas."""

    @staticmethod
    def forward(ctx, block, flight):
        ctx.flight = flight
        moves, group = flight.moves, flight.group
        with group.timer.phase("reshard"):
            send = _gathered(block, moves.sent)
            flight.forward = group.all_to_all_async(
                send, moves.splits(moves.sent), moves.splits(moves.filled)
            )
        return block.new_empty(0)

    @staticmethod
    def backward(ctx, _token):
        flight = ctx.flight
        moves, (pending, back) = flight.moves, flight.backward
        flight.backward = None
        with flight.group.timer.phase("reshard"):
            pending.wait()
            returned = [piece for piece, kept in zip(moves.sent, moves.returned, strict=True) if kept]
            grad_block = _placed(back, back.new_zeros(moves.in_shape), returned, add=True)
            return flight.replicas.all_reduce(grad_block), None


class _Receive(torch.autograd.Function):
    """Forward: wait for the pieces and place them in the output block. Backward: start sending the
    gradient of the pieces back (from the replica that `returns`)."""

    @staticmethod
    def forward(ctx, _token, flight):
        ctx.flight = flight
        moves, (pending, received) = flight.moves, flight.forward
        flight.forward = None
        with flight.group.timer.phase("reshard"):
            pending.wait()
            return _placed(received, received.new_zeros(moves.out_shape), moves.filled, add=False)

    @staticmethod
    def backward(ctx, grad):
        flight = ctx.flight
        moves, group = flight.moves, flight.group
        back_pieces = moves.filled if moves.returns else []
        with group.timer.phase("reshard"):
            sent = _gathered(grad, back_pieces)
            receive = moves.splits(moves.sent, moves.returned)
            flight.backward = group.all_to_all_async(
                sent, moves.splits(back_pieces), receive, count_sent=True
            )
        return grad.new_zeros(0), None


class _LocalReshard(torch.autograd.Function):
    @staticmethod
    def forward(ctx, block, moves, timer):
        ctx.moves, ctx.timer = moves, timer
        with timer.phase("reshard"):
            return moves.local.forward(block, moves.out_shape)

    @staticmethod
    def backward(ctx, grad):
        with ctx.timer.phase("reshard"):
            return ctx.moves.local.backward(grad, ctx.moves.in_shape), None, None


class Resharding:
    """A reshard begun by `reshard_start`; `wait` returns the moved block (once)."""

    def __init__(self, token: torch.Tensor, flight: _Flight | None):
        self.token, self.flight = token, flight

    def wait(self) -> torch.Tensor:
        if self.flight is None:
            return self.token  # a local move, done at the start
        return _Receive.apply(self.token, self.flight)


def reshard_start(block: torch.Tensor, moves: Moves, group: AxisGroup, replicas: AxisGroup) -> Resharding:
    """Begin moving `block` to the target layout of `moves` (`group`: the ranks of the grid; `replicas`:
    the group that replicates the input block, over which its gradient is summed): the all-to-all runs
    while the caller computes, until `wait`. Backward likewise: the gradient's all-to-all starts where
    `wait` was called and is waited for where this was."""
    if tuple(block.shape) != moves.in_shape:
        raise ValueError(f"reshard: a block of shape {tuple(block.shape)}, the moves expect {moves.in_shape}")
    if moves.local is not None:
        return Resharding(_LocalReshard.apply(block, moves, group.timer), None)
    flight = _Flight(moves, group, replicas)
    return Resharding(_Send.apply(block, flight), flight)


def reshard(block: torch.Tensor, moves: Moves, group: AxisGroup, replicas: AxisGroup) -> torch.Tensor:
    """`block` in the target layout of `moves`, moved at once (`reshard_start`'s arguments)."""
    return reshard_start(block, moves, group, replicas).wait()
