"""Blocks that the math replicates over a group, stored as one flat 1/size part per rank (Plexus).

The block is all-gathered before use; its gradient, a partial sum on every rank of the group, is
reduce-scattered back onto the parts. Each element therefore has exactly one owner, which alone keeps
optimizer state for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import Band, ceil_div
from gtool.geometry.layers import padded_slice
from gtool.trainer.comm.groups import AxisGroup


@dataclass(frozen=True)
class Place:
    """A rank's block of a parameter: rows x cols of a matrix (rows None: a vector's cols), split over the
    group of grid axis `axis`."""

    rows: Band | None
    cols: Band
    axis: int

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.cols.size,) if self.rows is None else (self.rows.size, self.cols.size)


def block_of(full: torch.Tensor, place: Place) -> torch.Tensor:
    """The zero-padded block of the full tensor `full` at `place`."""
    block = full.new_zeros(place.shape)
    if place.rows is None:
        real = full[padded_slice(place.cols)]
        block[: real.shape[0]] = real
    else:
        real = full[padded_slice(place.rows), padded_slice(place.cols)]
        block[: real.shape[0], : real.shape[1]] = real
    return block


def flat_part(block: torch.Tensor, parts: int, index: int) -> torch.Tensor:
    """Part `index` of `block` flattened and zero-padded into `parts` equal parts (a copy)."""
    per = ceil_div(block.numel(), parts)
    flat = block.new_zeros(per * parts)
    flat[: block.numel()] = block.reshape(-1)
    return flat[index * per : (index + 1) * per].clone()


def from_parts(parts: list[torch.Tensor], shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """The block of `shape` whose flat parts, in order, are `parts` (the inverse of `flat_part`)."""
    flat = parts[0] if len(parts) == 1 else torch.cat(parts)
    return flat[: torch.Size(shape).numel()].view(shape)


class _GatherShards(torch.autograd.Function):
    """All-gather the parts into the block; backward: reduce-scatter the block's gradient."""

    @staticmethod
    def forward(ctx, shard: torch.Tensor, group: AxisGroup, shape: torch.Size) -> torch.Tensor:
        ctx.group = group
        ctx.padded = shard.numel() * group.size
        return from_parts([group.all_gather(shard)], shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        padded = grad.new_zeros(ctx.padded)
        padded[: grad.numel()] = grad.reshape(-1)
        return ctx.group.reduce_scatter(padded), None, None


class ShardedBlock:
    """A dense block split evenly (zero-padded) over `group`; this rank trains part `group.index`.

    `place` is where the block lies in the whole parameter of `full_shape`: checkpoints record both, so
    that another grid can rebuild the parameter."""

    def __init__(self, block: torch.Tensor, place: Place, full_shape: tuple[int, ...], group: AxisGroup):
        self.place = place
        self.full_shape = full_shape
        self.shape = block.shape
        self.group = group
        self.shard = torch.nn.Parameter(flat_part(block, group.size, group.index))

    @classmethod
    def of(cls, full: torch.Tensor, place: Place, group: AxisGroup, device: torch.device) -> ShardedBlock:
        """This rank's part of the whole parameter `full` (the same on every rank) at `place`."""
        return cls(block_of(full, place).to(device), place, tuple(full.shape), group)

    def full(self) -> torch.Tensor:
        """The whole block, differentiable with respect to this rank's part."""
        if self.group.size == 1:
            return self.shard.view(self.shape)
        return _GatherShards.apply(self.shard, self.group, self.shape)

    def assemble(self, part: torch.Tensor) -> torch.Tensor:
        """The whole block from every rank's `part` shaped like the shard (e.g. its gradient), no autograd."""
        return from_parts([self.group.all_gather(part.detach())], self.shape)
