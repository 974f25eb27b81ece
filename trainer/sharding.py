"""Blocks that the math replicates over a group, stored as one flat 1/size part per rank (Plexus).

The block is all-gathered before use; its gradient, a partial sum on every rank of the group, is
reduce-scattered back onto the parts. Each element therefore has exactly one owner, which alone keeps
optimizer state for it.
"""

from __future__ import annotations

import torch

from gtool.trainer.distributed import AxisGroup


class _GatherShards(torch.autograd.Function):
    """All-gather the parts into the block; backward: reduce-scatter the block's gradient."""

    @staticmethod
    def forward(ctx, shard: torch.Tensor, group: AxisGroup, shape: torch.Size) -> torch.Tensor:
        ctx.group = group
        ctx.padded = shard.numel() * group.size
        return group.all_gather(shard)[: shape.numel()].view(shape)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        padded = grad.new_zeros(ctx.padded)
        padded[: grad.numel()] = grad.reshape(-1)
        return ctx.group.reduce_scatter(padded), None, None


class ShardedBlock:
    """A dense block split evenly (zero-padded) over `group`; this rank trains part `group.index`."""

    def __init__(self, block: torch.Tensor, group: AxisGroup):
        self.shape = block.shape
        self.group = group
        per = group.shard_numel(block.numel())
        flat = block.new_zeros(per * group.size)
        flat[: block.numel()] = block.reshape(-1)
        self.shard = torch.nn.Parameter(flat[group.index * per : (group.index + 1) * per].clone())

    def full(self) -> torch.Tensor:
        """The whole block, differentiable with respect to this rank's part."""
        if self.group.size == 1:
            return self.shard.view(self.shape)
        return _GatherShards.apply(self.shard, self.group, self.shape)

    def assemble(self, part: torch.Tensor) -> torch.Tensor:
        """The whole block from every rank's `part` shaped like the shard (e.g. its gradient), no autograd."""
        return self.group.all_gather(part.detach())[: self.shape.numel()].view(self.shape)
