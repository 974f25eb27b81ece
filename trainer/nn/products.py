"""The two products of a 3D-parallel GCN layer as autograd functions (docs/3d-gcn.md).

`aggregate` sums A @ F over the contraction group, its backward A^T dH over the input's group; `transform`
sums H @ W over the column group, its backward dH over the input's group and leaves dW partial (the
weight's `ShardedBlock` reduces it). The SpMM runs in row blocks, each reduced asynchronously while the
next is computed. The all-reduces of outputs and gradients name a cast slot (H, Q, dH, dF after the
aggregate-first names), so that `--comm-dtype bf16` carries them in bfloat16 (comm.groups.CastBuffers).
"""

from __future__ import annotations

import torch

from gtool.trainer.comm.groups import AxisGroup, Pending
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.adjacency import BlockedAdjacency, RowBlock


def _blocked_product(
    blocks: list[RowBlock], dense: torch.Tensor, group: AxisGroup | None, timer: PhaseTimer, operand: str
):
    """(blocks @ dense) summed over `group`, each row block's sum started as soon as the block is done
    (cast slot: the operand's name and the block's index)."""
    rows = blocks[-1][1]
    out = dense.new_empty(rows, dense.shape[1])
    dense = dense.contiguous()
    pending: list[Pending] = []
    for index, (lo, hi, block) in enumerate(blocks):
        with timer.phase("spmm"):
            torch.mm(block, dense, out=out[lo:hi])
        if group is not None:
            pending.append(group.all_reduce_async(out[lo:hi], slot=(operand, index)))
    for work in pending:
        work.wait()
    return out


class _Aggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, adjacency, reduce_group, grad_group, timer):
        ctx.adjacency, ctx.grad_group, ctx.timer = adjacency, grad_group, timer
        return _blocked_product(adjacency.blocks, features, reduce_group, timer, "H")

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        blocks = ctx.adjacency.transpose_blocks
        grad_features = _blocked_product(blocks, grad, ctx.grad_group, ctx.timer, "dF")
        return grad_features, None, None, None, None


def aggregate(
    features: torch.Tensor,
    adjacency: BlockedAdjacency,
    reduce_group: AxisGroup,
    grad_group: AxisGroup | None,
    timer: PhaseTimer,
) -> torch.Tensor:
    """H = sum over `reduce_group` of A @ F; backward dF = A^T dH summed over `grad_group`.

    `grad_group` None leaves dF a partial sum, for an input whose owner reduces it (a `ShardedBlock`).
    """
    return _Aggregate.apply(features, adjacency, reduce_group, grad_group, timer)


class _Transform(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, input_group, output_group, timer):
        ctx.save_for_backward(hidden, weight)
        ctx.input_group, ctx.timer = input_group, timer
        with timer.phase("dense"):
            out = hidden @ weight
        return output_group.all_reduce(out, slot="Q")

    @staticmethod
    def backward(ctx, grad):
        hidden, weight = ctx.saved_tensors
        grad_hidden = grad_weight = None
        pending = None
        if ctx.needs_input_grad[0]:
            with ctx.timer.phase("dense"):
                grad_hidden = grad @ weight.T
            if ctx.input_group is not None:
                pending = ctx.input_group.all_reduce_async(grad_hidden, slot="dH")
        if ctx.needs_input_grad[1]:
            with ctx.timer.phase("dense"):
                grad_weight = hidden.T @ grad
        if pending is not None:
            pending.wait()
        return grad_hidden, grad_weight, None, None, None


def transform(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    input_group: AxisGroup | None,
    output_group: AxisGroup,
    timer: PhaseTimer,
) -> torch.Tensor:
    """Q = sum over `output_group` of H @ W; backward dH summed over `input_group`, dW left partial.

    `input_group` None leaves dH a partial sum, for an input whose owner reduces it (a `ShardedBlock`)."""
    return _Transform.apply(hidden, weight, input_group, output_group, timer)
