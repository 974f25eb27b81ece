"""The CPU side of the fused RMSNorm + ReLU + dropout (+ residual) passes, as numba kernels.

Each is one parallel pass over a block (rows split over threads) that decides dropout with the kernels
of `dropout.kernels`, so the masks are those of `dropout.masks`, bit for bit. Sums run in float64 and are
stored in the block's dtype. Backward's column sums (the scale's gradient) are taken per chunk of
CHUNK_ROWS rows and then added up: no two threads write one partial, and the result does not depend on
the number of threads.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import prange

from gtool.compiled import parallel_kernel
from gtool.trainer.nn.dropout.kernels import kept, mask_arguments, row_hash, share_threads
from gtool.trainer.nn.dropout.masks import Block, MaskSpec, RowsBlock

CHUNK_ROWS = 1024
"""Rows of one partial of backward's column sums."""


@parallel_kernel()
def _row_squares(z, out):
    rows, cols = z.shape
    for i in prange(rows):
        total = 0.0
        for j in range(cols):
            value = np.float64(z[i, j])
            total += value * value
        out[i] = total


@parallel_kernel()
def _forward(
    z, inverse_rms, gamma, residual, out, row_ids, col0, width, row_key, column_key, threshold, keep
):
    rows, cols = z.shape
    for i in prange(rows):
        hashed = row_hash(row_ids[i], row_key)
        scale = inverse_rms[i]
        for j in range(cols):
            value = z[i, j] * scale * gamma[j]
            passed = value > 0 and kept(hashed, col0 + j, width, column_key, threshold)
            dropped = value * keep if passed else 0.0
            out[i, j] = dropped if residual is None else residual[i, j] + dropped


@parallel_kernel()
def _backward_sums(
    z,
    inverse_rms,
    gamma,
    grad,
    row_dots,
    partials,
    row_ids,
    col0,
    width,
    row_key,
    column_key,
    threshold,
    keep,
):
    rows, cols = z.shape
    for chunk in prange(partials.shape[0]):
        column_sums = partials[chunk]
        for i in range(chunk * CHUNK_ROWS, min(rows, (chunk + 1) * CHUNK_ROWS)):
            hashed = row_hash(row_ids[i], row_key)
            scale = inverse_rms[i]
            total = 0.0
            for j in range(cols):
                normalized = z[i, j] * scale
                passed = normalized * gamma[j] > 0 and kept(hashed, col0 + j, width, column_key, threshold)
                if passed:
                    product = np.float64(grad[i, j] * keep * normalized)
                    column_sums[j] += product
                    total += product * gamma[j]
            row_dots[i] = total


@parallel_kernel()
def _backward_input(
    z, inverse_rms, gamma, grad, row_means, out, row_ids, col0, width, row_key, column_key, threshold, keep
):
    rows, cols = z.shape
    for i in prange(rows):
        hashed = row_hash(row_ids[i], row_key)
        scale = inverse_rms[i]
        mean = row_means[i]
        for j in range(cols):
            normalized = z[i, j] * scale
            passed = normalized * gamma[j] > 0 and kept(hashed, col0 + j, width, column_key, threshold)
            through = grad[i, j] * keep * gamma[j] if passed else 0.0
            out[i, j] = scale * (through - normalized * mean)


def _keep(spec: MaskSpec, dtype: torch.dtype) -> np.floating:
    """The scale of kept elements in the block's dtype (as the specification's `out * keep_value`)."""
    return np.float64(spec.keep_value) if dtype == torch.float64 else np.float32(spec.keep_value)


def row_squares(z: torch.Tensor) -> torch.Tensor:
    """Each row's sum of squares over the block's columns."""
    threads = share_threads()
    out = torch.empty(z.shape[0], dtype=z.dtype)
    _row_squares.on(threads)(z.numpy(), out.numpy())
    return out


def forward(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    residual: torch.Tensor | None,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> torch.Tensor:
    """residual + dropout(relu(z * inverse_rms * gamma)), in one pass."""
    threads = share_threads()
    out = torch.empty_like(z)
    extra = None if residual is None else residual.numpy()
    arguments = (*mask_arguments(spec, placement), _keep(spec, z.dtype))
    _forward.on(threads)(z.numpy(), inverse_rms.numpy(), gamma.numpy(), extra, out.numpy(), *arguments)
    return out


def backward_sums(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    grad: torch.Tensor,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(t, the scale's gradient) with g the gradient through dropout and ReLU and n = z * inverse_rms:
    t = sum over the block's columns of g * gamma * n per row, and the scale's gradient the sum over the
    block's rows of g * n per column."""
    threads = share_threads()
    rows, cols = z.shape
    row_dots = torch.empty(rows, dtype=z.dtype)
    partials = torch.zeros(-(-rows // CHUNK_ROWS), cols, dtype=torch.float64)
    arguments = (*mask_arguments(spec, placement), _keep(spec, z.dtype))
    _backward_sums.on(threads)(
        z.numpy(),
        inverse_rms.numpy(),
        gamma.numpy(),
        grad.numpy(),
        row_dots.numpy(),
        partials.numpy(),
        *arguments,
    )
    return row_dots, partials.sum(dim=0).to(gamma.dtype)


def backward_input(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    grad: torch.Tensor,
    row_means: torch.Tensor,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> torch.Tensor:
    """dz = inverse_rms * (g * gamma - n * row_means), in one pass (row_means: t / width, t over the row)."""
    threads = share_threads()
    out = torch.empty_like(z)
    arguments = (*mask_arguments(spec, placement), _keep(spec, z.dtype))
    _backward_input.on(threads)(
        z.numpy(),
        inverse_rms.numpy(),
        gamma.numpy(),
        grad.numpy(),
        row_means.numpy(),
        out.numpy(),
        *arguments,
    )
    return out
