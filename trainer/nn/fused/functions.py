"""The fused RMSNorm + ReLU + dropout (+ residual add) of a ScaleGNN block as one autograd function.

Forward is two passes (the rows' sums of squares, all-reduced over the column group, then the output);
backward two more (per-row dots, all-reduced, with the scale's column sums; then dz). Only z and the
rows' inverse RMS are kept for backward: the ReLU and dropout decisions are recomputed there. The
passes are timed as dense work, the row sums' all-reduces (nested) as comm.
"""

from __future__ import annotations

import torch

from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.nn.dropout import NO_DROPOUT
from gtool.trainer.nn.dropout.masks import Block, MaskSpec, RowsBlock
from gtool.trainer.nn.fused import backends
from gtool.trainer.nn.fused.reference import NORM_EPS, inverse_rms, rms_relu_dropout_reference


class _RmsReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, gamma, residual, col_group, width, spec, placement, eps, passes):
        with col_group.timer.phase("dense"):
            z, gamma = z.contiguous(), gamma.contiguous()
            scales = inverse_rms(col_group.all_reduce(passes.row_squares(z)), width, eps)
            residual = None if residual is None else residual.contiguous()
            y = passes.forward(z, scales, gamma, residual, spec, placement)
        ctx.save_for_backward(z, scales, gamma)
        ctx.col_group, ctx.width, ctx.passes = col_group, width, passes
        ctx.spec, ctx.placement = spec, placement
        return y

    @staticmethod
    def backward(ctx, grad):
        z, scales, gamma = ctx.saved_tensors
        with ctx.col_group.timer.phase("dense"):
            grad = grad.contiguous()
            row_dots, d_gamma = ctx.passes.backward_sums(z, scales, gamma, grad, ctx.spec, ctx.placement)
            d_z = None
            if ctx.needs_input_grad[0]:
                row_means = ctx.col_group.all_reduce(row_dots) / ctx.width
                d_z = ctx.passes.backward_input(z, scales, gamma, grad, row_means, ctx.spec, ctx.placement)
        d_residual = grad if ctx.needs_input_grad[2] else None
        return d_z, d_gamma, d_residual, None, None, None, None, None, None


def _check(z: torch.Tensor, gamma: torch.Tensor, placement: Block | RowsBlock, residual: torch.Tensor | None):
    rows, cols = (
        (placement.rows.numel(), placement.columns) if isinstance(placement, RowsBlock) else placement[1::2]
    )
    problems = [
        (z.dim() != 2 or tuple(z.shape) != (rows, cols), f"z of shape {tuple(z.shape)}"),
        (tuple(gamma.shape) != (cols,), f"gamma of shape {tuple(gamma.shape)}"),
        (
            residual is not None and residual.shape != z.shape,
            f"a residual of shape {tuple(getattr(residual, 'shape', ()))}",
        ),
    ]
    for wrong, what in problems:
        if wrong:
            raise ValueError(f"rms_relu_dropout: {what} does not fit a block of {rows} rows x {cols} columns")


def rms_relu_dropout(
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
    """residual + dropout(relu(z * r * gamma)), r = 1 / sqrt(mean of z^2 over the row's `width` real
    columns + eps), for the block `placement` (padded global coordinates) of a hidden activation whose
    columns are split over `col_group`; dropout is `spec`'s mask (none when not `training`), residual
    None adds nothing. Fused passes where `backends` has them, the specification elsewhere."""
    _check(z, gamma, placement, residual)
    spec = spec if training else NO_DROPOUT
    passes = backends.passes_for(z, gamma, residual)
    if passes is None:
        return rms_relu_dropout_reference(z, gamma, col_group, width, spec, placement, residual, eps)
    return _RmsReluDropout.apply(z, gamma, residual, col_group, width, spec, placement, eps, passes)
