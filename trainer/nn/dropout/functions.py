"""Dropout as autograd functions that keep no mask for backward.

`dropout` recomputes its mask from the coordinates in backward (it saves nothing); `relu_dropout`, the
ReLU of a hidden layer fused with the dropout of the next layer's input, saves one byte per element:
whether the element is positive and kept (the ReLU's own output, four bytes, is not kept). Each pass is
one kernel of the implementation `backends` picks for the tensor (numba on the CPU, Triton on CUDA);
where there is none, and for a mini-batch's rows (`RowsBlock`) on CUDA (the Triton kernels take a
block's first row), the same decisions come from `masks.keep_mask` in plain torch operations.
"""

from __future__ import annotations

from types import ModuleType

import torch

from gtool.trainer.nn.dropout import backends
from gtool.trainer.nn.dropout.masks import Block, MaskSpec, RowsBlock, keep_mask

NO_DROPOUT = MaskSpec(row_key=0, column_key=0, threshold=0, keep_value=1.0, width=1 << 32)
"""A mask that keeps everything: `relu_dropout` with it is a ReLU that saves one byte per element."""


def _passes(source: torch.Tensor, block: Block | RowsBlock) -> ModuleType | None:
    """The fused kernels for `source` that take `block` (any rows: numba's; contiguous rows: Triton's too)."""
    return backends.passes_for(source, any_rows=isinstance(block, RowsBlock))


def _scaled(source: torch.Tensor, spec: MaskSpec, block: Block | RowsBlock) -> torch.Tensor:
    passes = _passes(source, block)
    if passes is not None:
        return passes.scale(source, spec, block)
    return torch.where(keep_mask(spec, block, source.device), source * spec.keep_value, 0.0)


def _scaled_where(source: torch.Tensor, flag: torch.Tensor, keep_value: float) -> torch.Tensor:
    passes = backends.passes_for(source)
    if passes is not None:
        return passes.scale_flagged(source, flag, keep_value)
    return torch.where(flag, source * keep_value, 0.0)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, source, spec, block):
        ctx.spec, ctx.block = spec, block
        return _scaled(source, spec, block)

    @staticmethod
    def backward(ctx, grad):
        return _scaled(grad, ctx.spec, ctx.block), None, None


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, source, spec, block):
        passes = _passes(source, block)
        if passes is not None:
            out, flag = passes.relu_scale(source, spec, block)
        else:
            flag = (source > 0) & keep_mask(spec, block, source.device)
            out = torch.where(flag, source * spec.keep_value, 0.0)
        ctx.keep_value = spec.keep_value
        ctx.save_for_backward(flag)
        return out

    @staticmethod
    def backward(ctx, grad):
        (flag,) = ctx.saved_tensors
        return _scaled_where(grad, flag, ctx.keep_value), None, None


def dropout(source: torch.Tensor, spec: MaskSpec, block: Block | RowsBlock) -> torch.Tensor:
    """`source` (the block `block` of a layer input) with dropped elements zeroed and kept ones scaled."""
    return _Dropout.apply(source, spec, block)


def relu_dropout(source: torch.Tensor, spec: MaskSpec, block: Block | RowsBlock) -> torch.Tensor:
    """dropout(relu(source)); backward needs only a one-byte flag per element."""
    return _ReluDropout.apply(source, spec, block)
