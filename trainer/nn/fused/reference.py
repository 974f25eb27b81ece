"""The elementwise part of a ScaleGNN block in plain torch operations and autograd: the specification the
fused passes are checked against, and what runs where no fused pass applies (other dtypes or devices).

    y = residual + dropout(relu(z * r[:, None] * gamma[None, :]))      r = 1 / sqrt(sum of z^2 / width + eps)

The row sums of squares run over the whole row, every rank of `col_group` holding some of its columns.
"""

from __future__ import annotations

import torch

from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.nn.dropout.masks import Block, MaskSpec, RowsBlock, keep_mask

NORM_EPS = 1e-6
"""What RMSNorm adds to the mean square before its square root."""


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of the row sums of squares: float32, or the block's own if wider (float64 stays float64)."""
    return torch.promote_types(dtype, torch.float32)


def inverse_rms(squares: torch.Tensor, width: int, eps: float) -> torch.Tensor:
    """1 / sqrt(mean square + eps) per row, from the rows' sums of squares over their `width` real columns."""
    return torch.reciprocal(torch.sqrt(squares / width + eps))


class _SumOverGroup(torch.autograd.Function):
    """A sum over the ranks of a group whose result every rank uses: its gradient is the sum of theirs."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        return group.all_reduce(tensor.clone())

    @staticmethod
    def backward(ctx, grad):
        return ctx.group.all_reduce(grad.clone()), None


def rms_relu_dropout_reference(
    z: torch.Tensor,
    gamma: torch.Tensor,
    col_group: AxisGroup,
    width: int,
    spec: MaskSpec,
    placement: Block | RowsBlock,
    residual: torch.Tensor | None = None,
    eps: float = NORM_EPS,
    training: bool = True,
) -> torch.Tensor:
    """residual + dropout(relu(rmsnorm(z) * gamma)) of the block `placement` of a hidden activation whose
    `width` real columns are split over `col_group` (no dropout when not `training`)."""
    values = z.to(accumulation_dtype(z.dtype))
    squares = _SumOverGroup.apply(values.square().sum(dim=1), col_group)
    scaled = values * inverse_rms(squares, width, eps)[:, None] * gamma.to(values.dtype)[None, :]
    out = torch.relu(scaled)
    if training and spec.threshold > 0:
        out = torch.where(keep_mask(spec, placement, z.device), out * spec.keep_value, 0.0)
    out = out.to(z.dtype)
    return out if residual is None else residual + out
