"""Process groups of the 3D grid and the timed collectives the layers use.

Every collective goes through an `AxisGroup`, the ranks that share all coordinates but one; a group of one
rank returns at once. Collectives count their operands' bytes (`CommBytes`, which `--log` records and
`gtool plan` predicts); with `--comm-dtype bf16` the all-reduces that name a cast slot carry bfloat16.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist

from gtool.geometry.collectives import DATA, GROUPS, KINDS
from gtool.geometry.grid import ProcessGrid, group_ranks
from gtool.trainer.comm.timing import PhaseTimer

_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class CommBytes:
    """Bytes of the collectives this rank took part in since the last `reset`, by group and kind.

    A collective counts the bytes of its whole operand: the reduced tensor of an all-reduce, the gathered
    tensor of an all-gather, the tensor scattered by a reduce-scatter (the same on every rank of the group).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.counts = {group: dict.fromkeys(KINDS, 0) for group in GROUPS}

    def add(self, group: str, kind: str, tensor: torch.Tensor) -> None:
        self.counts[group][kind] += tensor.numel() * tensor.element_size()

    def as_list(self) -> list[int]:
        """The counts flattened in (group, kind) order (see `from_list`)."""
        return [self.counts[group][kind] for group in GROUPS for kind in KINDS]

    @staticmethod
    def from_list(values: list[int]) -> dict[str, dict[str, int]]:
        """Counts flattened by `as_list` back as {group: {kind: bytes}}."""
        width = len(KINDS)
        return {
            group: dict(zip(KINDS, values[g * width : (g + 1) * width], strict=True))
            for g, group in enumerate(GROUPS)
        }


class CastBuffers:
    """Preallocated buffers in which all-reduces carry their operands in a narrower `dtype` (bf16).

    One flat buffer per slot, grown only when an operand is larger than any it carried before: after the
    first step no cast allocates. Two collectives in flight at once must use different slots.
    """

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.flat: dict[Hashable, torch.Tensor] = {}

    def cast(self, slot: Hashable, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` copied into the buffer of `slot` (a view of its shape)."""
        flat = self.flat.get(slot)
        if flat is None or flat.numel() < tensor.numel() or flat.device != tensor.device:
            flat = self.flat[slot] = torch.empty(tensor.numel(), dtype=self.dtype, device=tensor.device)
        wire = flat[: tensor.numel()].view(tensor.shape)
        wire.copy_(tensor)
        return wire


class Pending:
    """An asynchronous collective in flight; `wait` counts the time blocked as communication (and the
    copy of a cast operand back into its tensor)."""

    def __init__(
        self, work: dist.Work | None, timer: PhaseTimer, cast: tuple[torch.Tensor, torch.Tensor] | None = None
    ):
        self.work = work
        self.timer = timer
        self.cast = cast

    def wait(self) -> None:
        if self.work is not None:
            with self.timer.phase("comm"):
                self.work.wait()
                if self.cast is not None:
                    wire, tensor = self.cast
                    tensor.copy_(wire)


@dataclass
class AxisGroup:
    """The ranks along one grid axis through this rank: `size` of them, this one at `index`."""

    size: int
    index: int
    group: dist.ProcessGroup | None
    timer: PhaseTimer
    device: torch.device
    name: str = "all"
    sent: CommBytes | None = None
    casts: CastBuffers | None = None

    def _count(self, kind: str, tensor: torch.Tensor) -> None:
        if self.sent is not None:
            self.sent.add(self.name, kind, tensor)

    def _wire(self, tensor: torch.Tensor, slot: Hashable | None) -> torch.Tensor:
        """What an all-reduce of `tensor` carries: its copy in the cast buffer of `slot` when the group
        casts and a slot is named, else `tensor` itself."""
        if slot is None or self.casts is None:
            return tensor
        with self.timer.phase("comm"):
            return self.casts.cast(slot, tensor)

    def all_reduce(
        self,
        tensor: torch.Tensor,
        op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
        slot: Hashable | None = None,
    ) -> torch.Tensor:
        """Reduce `tensor` in place over the group and return it (through the cast buffer of `slot`)."""
        if self.group is not None:
            wire = self._wire(tensor, slot)
            self._count("all_reduce", wire)
            with self.timer.phase("comm"):
                dist.all_reduce(wire, op=op, group=self.group)
                if wire is not tensor:
                    tensor.copy_(wire)
        return tensor

    def all_reduce_async(self, tensor: torch.Tensor, slot: Hashable | None = None) -> Pending:
        """Start summing `tensor` in place over the group (through the cast buffer of `slot`)."""
        if self.group is None:
            return Pending(None, self.timer)
        wire = self._wire(tensor, slot)
        self._count("all_reduce", wire)
        work = dist.all_reduce(wire, group=self.group, async_op=True)
        return Pending(work, self.timer, None if wire is tensor else (wire, tensor))

    def barrier(self) -> None:
        """Return once every rank of the group has called it."""
        self.all_reduce(torch.zeros(1, device=self.device))

    def all_gather(self, shard: torch.Tensor) -> torch.Tensor:
        """Concatenation of every rank's 1-D `shard`, in group order."""
        if self.group is None:
            return shard
        out = shard.new_empty(shard.numel() * self.size)
        self._count("all_gather", out)
        with self.timer.phase("comm"):
            _all_gather_single(out, shard.contiguous(), group=self.group)
        return out

    def all_to_all(
        self, send: torch.Tensor, send_splits: list[int], receive_splits: list[int], count_sent: bool = False
    ) -> torch.Tensor:
        """Every rank's 1-D `send` cut into `send_splits` (elements per rank of the group, in group order)
        and exchanged: the parts received, `receive_splits` of them, concatenated in group order. Counts
        the bytes received, or sent with `count_sent` (either way those of the block on the side whose
        layout is fixed: a residual's output block)."""
        pending, out = self.all_to_all_async(send, send_splits, receive_splits, count_sent)
        pending.wait()
        return out

    def all_to_all_async(
        self, send: torch.Tensor, send_splits: list[int], receive_splits: list[int], count_sent: bool = False
    ) -> tuple[Pending, torch.Tensor]:
        """`all_to_all` started: its pending collective and the buffer the parts arrive in (`send` keeps
        its values until the wait)."""
        if self.group is None:
            return Pending(None, self.timer), send
        out = send.new_empty(sum(receive_splits))
        self._count("all_to_all", send if count_sent else out)
        send = send.contiguous()
        work = dist.all_to_all_single(out, send, receive_splits, send_splits, group=self.group, async_op=True)
        return Pending(work, self.timer), out

    def reduce_scatter(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's part of the sum over the group of the 1-D `full` (size * shard elements)."""
        if self.group is None:
            return full
        out = full.new_empty(full.numel() // self.size)
        self._count("reduce_scatter", full)
        with self.timer.phase("comm"):
            _reduce_scatter_single(out, full.contiguous(), group=self.group)
        return out


@dataclass
class GridComm:
    """This rank's place in the grid: its coordinates and the x, y and z groups through it.

    With D replicas of the grid (--data-parallel), `rank` is the rank within its replica `replica`,
    `data` the group of the ranks at the same place in every replica, `everyone` the whole run, and
    `replica_ranks` the ranks of this replica of the grid (the residuals' all-to-alls).
    """

    grid: ProcessGrid
    rank: int
    axes: tuple[AxisGroup, AxisGroup, AxisGroup]
    everyone: AxisGroup
    timer: PhaseTimer
    sent: CommBytes = field(default_factory=CommBytes)
    data: AxisGroup | None = None
    replica: int = 0
    replica_ranks: AxisGroup | None = None

    @property
    def whole_grid(self) -> AxisGroup:
        """The ranks of this replica of the grid, in grid rank order."""
        return self.everyone if self.replica_ranks is None else self.replica_ranks

    @property
    def coords(self) -> tuple[int, int, int]:
        return self.grid.coords(self.rank)

    @property
    def replicas(self) -> int:
        return 1 if self.data is None else self.data.size

    def cast_all_reduces(self, dtype: torch.dtype | None) -> GridComm:
        """Have the x, y and z groups carry the all-reduces that name a cast slot (those of H, Q, dH and
        dF) in `dtype` (bfloat16; None: in their own dtype), through one set of buffers; returns self."""
        casts = CastBuffers(dtype) if dtype is not None else None
        for axis in self.axes:
            axis.casts = casts
        return self


GroupCache = dict[tuple[int, ...], object]
"""Process groups made so far in a world, by their ranks (new_group's result, a non-member's too)."""


def build_grid_comm(
    grid: ProcessGrid,
    timeout: float,
    timer: PhaseTimer,
    device: torch.device,
    made: GroupCache | None = None,
    replicas: int = 1,
) -> GridComm | None:
    """Create the process groups of `replicas` replicas of the grid over world ranks 0..replicas*grid.size-1,
    replica d on ranks d*grid.size.. (every world rank must call this).

    World ranks beyond them (a test running several grids in one world) take part in creating the
    groups and get None. With `made`, groups of the same ranks are made once and shared by every grid
    built with that cache (every world rank must build the same grids in the same order).
    """
    world_rank = dist.get_rank()
    world_size = dist.get_world_size()
    run_size = replicas * grid.size
    if world_size < run_size:
        raise ValueError(f"{replicas} x {grid} grid needs {run_size} processes, the world has {world_size}")
    limit = timedelta(seconds=timeout)
    made = {} if made is None else made

    def new_group(members: list[int]):
        key = tuple(members)
        if key not in made:
            made[key] = dist.new_group(members, timeout=limit)
        return made[key]

    sent = CommBytes()
    inside = world_rank < run_size
    replica, rank = divmod(world_rank, grid.size) if inside else (0, 0)
    coords = grid.coords(rank)
    axes = []
    for axis in range(3):
        mine = None
        if grid.dims[axis] > 1:
            for base in range(0, run_size, grid.size):
                for first in range(grid.size):
                    if grid.coords(first)[axis] != 0:
                        continue
                    members = [base + member for member in group_ranks(grid, first, axis)]
                    group = new_group(members)
                    if world_rank in members:
                        mine = group
        axes.append(AxisGroup(grid.dims[axis], coords[axis], mine, timer, device, GROUPS[axis], sent))
    data_group = None
    if replicas > 1:
        for place in range(grid.size):
            members = list(range(place, run_size, grid.size))
            group = new_group(members)
            if world_rank in members:
                data_group = group
    replica_group = None
    if replicas > 1 and grid.size > 1:
        for base in range(0, run_size, grid.size):
            group = new_group(list(range(base, base + grid.size)))
            if base <= world_rank < base + grid.size:
                replica_group = group
    everyone_group = new_group(list(range(run_size))) if run_size > 1 else None
    if not inside:
        return None
    everyone = AxisGroup(run_size, world_rank, everyone_group, timer, device, "all", sent)
    data = AxisGroup(replicas, replica, data_group, timer, device, DATA, sent) if replicas > 1 else None
    replica_ranks = None
    if replicas > 1:
        replica_ranks = AxisGroup(grid.size, rank, replica_group, timer, device, "all", sent)
    axes3 = (axes[0], axes[1], axes[2])
    return GridComm(grid, rank, axes3, everyone, timer, sent, data, replica, replica_ranks)


def grid_comm(
    grid: ProcessGrid,
    timeout: float,
    timer: PhaseTimer,
    device: torch.device,
    made: GroupCache | None = None,
    replicas: int = 1,
) -> GridComm:
    """build_grid_comm on a world whose every rank is in one of the replicas of the grid."""
    comm = build_grid_comm(grid, timeout, timer, device, made, replicas)
    if comm is None:
        raise ValueError(f"world rank {dist.get_rank()} is outside the {replicas} x {grid} grid")
    return comm
