"""The CUDA side of the fused passes of `kernels`, as Triton kernels, one launch per pass.

Programs take tiles as `dropout.triton_kernels` does and decide dropout with its `kept_rows` (32-bit
hashes of the tile's rows and columns), so the masks are those of `dropout.masks`, bit for bit; a
mini-batch's rows (`RowsBlock`) are read from its row ids. Backward's column sums are taken per program
of PROGRAM_ROWS rows and then added up (no atomics: the result is the same every run).
Importing this module needs triton; with TRITON_INTERPRET=1 set before it (and the dropout kernels) are
imported, its kernels run in Triton's interpreter on CPU tensors, which is how they are tested.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from gtool.trainer.nn.dropout.masks import Block, MaskSpec, RowsBlock
from gtool.trainer.nn.dropout.triton_kernels import (
    PER_CALL,
    kept_rows,
    kept_scale,
    launch_shape,
    mask_arguments,
    scale_bits,
    tile,
)

PROGRAM_ROWS = 1024
"""Rows of one program of backward's first pass: one partial of the column sums each."""


@triton.jit
def _decisions(
    r,
    c,
    rows,
    row0,
    row_ids,
    col0,
    real_cols,
    row_key,
    column_key,
    threshold,
    ROW_IDS: tl.constexpr,
    DROPPING: tl.constexpr,
):
    """The keep decisions of the tile (r, c): global rows row0 + r, or row_ids[r] for a mini-batch."""
    if ROW_IDS:
        global_rows = tl.load(row_ids + r, mask=r < rows, other=0).to(tl.uint32)
    else:
        global_rows = r.to(tl.uint32) + row0.to(tl.uint32)
    return kept_rows(global_rows, c, col0, real_cols, row_key, column_key, threshold, DROPPING)


@triton.jit
def _add(a, b):
    return a + b


_SUM_COMBINE = getattr(tl.standard, "_sum_combine", _add)
"""tl.sum's own combine function (Triton's interpreter sums with numpy when it sees it), else a sum."""


@triton.jit
def _sum(x, axis: tl.constexpr):
    """tl.sum from builtins only: the kernels then run in Triton's interpreter even when triton itself
    was imported without TRITON_INTERPRET (tl.sum is a compiled function then), as in the tests."""
    return tl.reduce(x, axis, _SUM_COMBINE)


@triton.jit
def _row_squares_kernel(z, out, rows, cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    total = tl.full([BLOCK_ROWS], 0, z.dtype.element_ty)
    for first in range(0, cols, BLOCK_COLS):
        c = first + tl.arange(0, BLOCK_COLS)
        inside = (r < rows)[:, None] & (c < cols)[None, :]
        x = tl.load(z + r[:, None] * cols + c[None, :], mask=inside, other=0)
        total += _sum(x * x, axis=1)
    tl.store(out + r, total, mask=r < rows)


@triton.jit(do_not_specialize=PER_CALL)
def _forward_kernel(
    z,
    inverse_rms,
    gamma,
    residual,
    out,
    row_ids,
    rows,
    cols,
    row0: tl.int64,
    col0: tl.int64,
    real_cols: tl.int64,
    row_key: tl.int64,
    column_key: tl.int64,
    threshold: tl.int64,
    keep_bits: tl.int64,
    RESIDUAL: tl.constexpr,
    ROW_IDS: tl.constexpr,
    DROPPING: tl.constexpr,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    r, c, inside = tile(rows, cols, BLOCK_ROWS, BLOCK_COLS)
    at = r[:, None] * cols + c[None, :]
    scale = tl.load(inverse_rms + r, mask=r < rows, other=0)
    value = tl.load(z + at, mask=inside, other=0) * scale[:, None]
    value = value * tl.load(gamma + c, mask=c < cols, other=0)[None, :]
    decisions = _decisions(
        r, c, rows, row0, row_ids, col0, real_cols, row_key, column_key, threshold, ROW_IDS, DROPPING
    )
    y = tl.where((value > 0) & decisions, value * kept_scale(keep_bits, FLOAT64), 0.0)
    if RESIDUAL:
        y = tl.load(residual + at, mask=inside, other=0) + y
    tl.store(out + at, y, mask=inside)


@triton.jit(do_not_specialize=PER_CALL)
def _backward_sums_kernel(
    z,
    inverse_rms,
    gamma,
    grad,
    row_dots,
    partials,
    row_ids,
    rows,
    cols,
    row0: tl.int64,
    col0: tl.int64,
    real_cols: tl.int64,
    row_key: tl.int64,
    column_key: tl.int64,
    threshold: tl.int64,
    keep_bits: tl.int64,
    ROW_IDS: tl.constexpr,
    DROPPING: tl.constexpr,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROW_TILES: tl.constexpr,
):
    c = tl.program_id(1).to(tl.int64) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    scales = tl.load(gamma + c, mask=c < cols, other=0)
    column_sums = tl.full([BLOCK_COLS], 0, z.dtype.element_ty)
    first = tl.program_id(0).to(tl.int64) * (BLOCK_ROWS * ROW_TILES)
    for k in range(tl.minimum(ROW_TILES, (rows - first + BLOCK_ROWS - 1) // BLOCK_ROWS)):
        r = first + k * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
        inside = (r < rows)[:, None] & (c < cols)[None, :]
        at = r[:, None] * cols + c[None, :]
        normalized = (
            tl.load(z + at, mask=inside, other=0) * tl.load(inverse_rms + r, mask=r < rows, other=0)[:, None]
        )
        decisions = _decisions(
            r, c, rows, row0, row_ids, col0, real_cols, row_key, column_key, threshold, ROW_IDS, DROPPING
        )
        passed = (normalized * scales[None, :] > 0) & decisions
        through = tl.where(
            passed, tl.load(grad + at, mask=inside, other=0) * kept_scale(keep_bits, FLOAT64), 0.0
        )
        products = through * normalized
        column_sums += _sum(products, axis=0)
        tl.store(
            row_dots + tl.program_id(1).to(tl.int64) * rows + r,
            _sum(products * scales[None, :], axis=1),
            mask=r < rows,
        )
    tl.store(partials + tl.program_id(0).to(tl.int64) * cols + c, column_sums, mask=c < cols)


@triton.jit(do_not_specialize=PER_CALL)
def _backward_input_kernel(
    z,
    inverse_rms,
    gamma,
    grad,
    row_means,
    out,
    row_ids,
    rows,
    cols,
    row0: tl.int64,
    col0: tl.int64,
    real_cols: tl.int64,
    row_key: tl.int64,
    column_key: tl.int64,
    threshold: tl.int64,
    keep_bits: tl.int64,
    ROW_IDS: tl.constexpr,
    DROPPING: tl.constexpr,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    r, c, inside = tile(rows, cols, BLOCK_ROWS, BLOCK_COLS)
    at = r[:, None] * cols + c[None, :]
    scale = tl.load(inverse_rms + r, mask=r < rows, other=0)[:, None]
    scales = tl.load(gamma + c, mask=c < cols, other=0)[None, :]
    normalized = tl.load(z + at, mask=inside, other=0) * scale
    decisions = _decisions(
        r, c, rows, row0, row_ids, col0, real_cols, row_key, column_key, threshold, ROW_IDS, DROPPING
    )
    passed = (normalized * scales > 0) & decisions
    through = (
        tl.where(passed, tl.load(grad + at, mask=inside, other=0) * kept_scale(keep_bits, FLOAT64), 0.0)
        * scales
    )
    mean = tl.load(row_means + r, mask=r < rows, other=0)[:, None]
    tl.store(out + at, scale * (through - normalized * mean), mask=inside)


def _mask(z: torch.Tensor, spec: MaskSpec, placement: Block | RowsBlock) -> tuple[tuple, dict]:
    """The row ids (z itself when the rows are contiguous: never read), the mask's arguments and the
    compile-time constants of a pass over z."""
    row_ids = placement.rows.to(device=z.device, dtype=torch.int64) if isinstance(placement, RowsBlock) else z
    arguments = (
        row_ids,
        *z.shape,
        *mask_arguments(spec, placement, z.shape[1]),
        scale_bits(spec.keep_value, z.dtype),
    )
    constants = {"ROW_IDS": isinstance(placement, RowsBlock), "DROPPING": spec.threshold > 0}
    return arguments, constants


def row_squares(z: torch.Tensor) -> torch.Tensor:
    """Each row's sum of squares over the block's columns."""
    shape = launch_shape(z)
    out = torch.empty(z.shape[0], dtype=z.dtype, device=z.device)
    constants = {key: value for key, value in shape["constants"].items() if key != "FLOAT64"}
    if out.numel():
        _row_squares_kernel[(shape["grid"][0],)](z, out, *z.shape, **constants)
    return out


def forward(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    residual: torch.Tensor | None,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> torch.Tensor:
    """residual + dropout(relu(z * inverse_rms * gamma)), in one launch."""
    shape = launch_shape(z)
    out = torch.empty_like(z)
    if out.numel():
        arguments, constants = _mask(z, spec, placement)
        extra = z if residual is None else residual
        _forward_kernel[shape["grid"]](
            z,
            inverse_rms,
            gamma,
            extra,
            out,
            *arguments,
            RESIDUAL=residual is not None,
            **constants,
            **shape["constants"],
        )
    return out


def backward_sums(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    grad: torch.Tensor,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(t, the scale's gradient), as `kernels.backward_sums`, in one launch (and the sums of its partials)."""
    shape = launch_shape(z)
    rows, cols = z.shape
    tiles = max(1, PROGRAM_ROWS // shape["constants"]["BLOCK_ROWS"])
    programs = triton.cdiv(rows, tiles * shape["constants"]["BLOCK_ROWS"])
    row_dots = torch.empty(shape["grid"][1], rows, dtype=z.dtype, device=z.device)
    partials = torch.empty(programs, cols, dtype=z.dtype, device=z.device)
    if z.numel():
        arguments, constants = _mask(z, spec, placement)
        _backward_sums_kernel[(programs, shape["grid"][1])](
            z,
            inverse_rms,
            gamma,
            grad,
            row_dots,
            partials,
            *arguments,
            ROW_TILES=tiles,
            **constants,
            **shape["constants"],
        )
    return row_dots.sum(dim=0), partials.sum(dim=0)


def backward_input(
    z: torch.Tensor,
    inverse_rms: torch.Tensor,
    gamma: torch.Tensor,
    grad: torch.Tensor,
    row_means: torch.Tensor,
    spec: MaskSpec,
    placement: Block | RowsBlock,
) -> torch.Tensor:
    """dz = inverse_rms * (g * gamma - n * row_means), in one launch."""
    shape = launch_shape(z)
    out = torch.empty_like(z)
    if out.numel():
        arguments, constants = _mask(z, spec, placement)
        _backward_input_kernel[shape["grid"]](
            z, inverse_rms, gamma, grad, row_means, out, *arguments, **constants, **shape["constants"]
        )
    return out
