"""The two halves of a 3D-parallel GCN layer as autograd functions (docs/3d-gcn.md).

With the layer's roles (a, b, c), aggregate-first: `aggregate` computes H = sum over the b-group of
A[a, b] @ F[b, c] and, backward, dF = sum over the a-group of A^T dH; `transform` computes Q = sum over
the c-group of H @ W[c, b] and, backward, dH = sum over the b-group of dQ W^T and the partial dW = H^T dQ
(summed by the weight's `ShardedBlock`). Transform-first, the same two functions in the other order:
`transform` computes Z = sum over the c-group of F[b, c] @ W[c, a] (backward dF = dZ W^T over the a-group),
then `aggregate` Y = sum over the b-group of A[c, b] @ Z[b, a] (backward dZ = A^T dY over the c-group).
The SpMM runs in row blocks, each reduced asynchronously as soon as it is done so that its communication
overlaps the next block's computation. The all-reduces of the SpMMs' and the dense products' outputs and
gradients name a cast slot (H, Q, dH, dF after the aggregate-first names): with `--comm-dtype bf16` they
carry bfloat16 (gtool.trainer.distributed.CastBuffers).
"""

from __future__ import annotations

import torch

from gtool.loader.csr import csr_tensor
from gtool.loader.rank_data import AdjacencyShard
from gtool.trainer.distributed import AxisGroup, Pending
from gtool.trainer.timing import PhaseTimer

RowBlock = tuple[int, int, torch.Tensor]


def csr_row_block(csr: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of a sparse CSR matrix, as a CSR matrix sharing its index and value memory."""
    crow = csr.crow_indices()
    lo, hi = int(crow[start]), int(crow[stop])
    return csr_tensor(
        crow[start : stop + 1] - lo,
        csr.col_indices()[lo:hi],
        csr.values()[lo:hi],
        (stop - start, csr.shape[1]),
    )


def split_rows(csr: torch.Tensor, blocks: int) -> list[RowBlock]:
    """`csr` cut into at most `blocks` row blocks of equal height, with their row ranges.

    Equal heights, not equal nonzeros: the ranks that reduce a block together hold different shards with
    the same rows, and must cut them at the same rows.
    """
    rows = csr.shape[0]
    if blocks <= 1 or rows <= 1:
        return [(0, rows, csr)]
    bounds = sorted({rows * k // blocks for k in range(blocks + 1)})
    return [(lo, hi, csr_row_block(csr, lo, hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


class BlockedAdjacency:
    """A sparse CSR matrix and its transpose, cast to the training dtype and cut into row blocks."""

    def __init__(self, matrix: torch.Tensor, transpose: torch.Tensor, blocks: int, dtype: torch.dtype):
        self.shape = tuple(matrix.shape)
        self.nnz = int(matrix.values().shape[0])
        self.blocks = split_rows(matrix.to(dtype), blocks)
        self.transpose_blocks = split_rows(transpose.to(dtype), blocks)

    @classmethod
    def of(cls, shard: AdjacencyShard, blocks: int, dtype: torch.dtype) -> BlockedAdjacency:
        """An adjacency shard and its stored transpose."""
        return cls(shard.matrix, shard.transpose, blocks, dtype)


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
