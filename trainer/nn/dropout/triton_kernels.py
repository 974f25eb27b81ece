"""The CUDA side of dropout: the passes of `kernels` as Triton kernels, one launch per pass.

Each program hashes its tile's rows and columns once (`masks.mix32` in 32-bit registers) and decides every
element from the two, so only the source, the output and, for the fused ReLU, the one-byte flag touch
memory. Global coordinates are 32-bit (`masks.check_block`), so 32-bit unsigned wrap-around is exactly the
specification's `& MASK32`. Importing this module needs triton; with TRITON_INTERPRET=1 set before the
import the kernels run in Triton's interpreter on CPU tensors, which is how they are tested without a GPU.
"""

from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

from gtool.trainer.nn.dropout.masks import MIX_MULTIPLIERS, Block, MaskSpec, RowsBlock, check_block

_M0: tl.constexpr = tl.constexpr(MIX_MULTIPLIERS[0])
_M1: tl.constexpr = tl.constexpr(MIX_MULTIPLIERS[1])
TILE_ELEMENTS = 4096
"""Elements per program: a tile of up to 128 columns and as many rows as make it this size."""
PER_CALL = ["row0", "col0", "real_cols", "row_key", "column_key", "threshold", "keep_bits"]
"""Arguments that change from call to call (the keys every epoch): typed int64 and never specialized
on, so that their values compile nothing new."""


@triton.jit
def _mix32(x):
    """lowbias32 of a uint32 tensor (multiplications wrap modulo 2^32)."""
    x ^= x >> 16
    x *= tl.full(x.shape, _M0, tl.uint32)
    x ^= x >> 15
    x *= tl.full(x.shape, _M1, tl.uint32)
    return x ^ (x >> 16)


@triton.jit
def tile(rows, cols, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """This program's local rows and columns (int64: offsets into large blocks) and which are inside."""
    r = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    c = tl.program_id(1).to(tl.int64) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    inside = (r < rows)[:, None] & (c < cols)[None, :]
    return r, c, inside


@triton.jit
def kept_rows(global_rows, c, col0, real_cols, row_key, column_key, threshold, DROPPING: tl.constexpr):
    """The keep decisions of the tile of local columns c (of a block whose first column is col0) in the
    rows whose global ids are `global_rows` (uint32)."""
    kept = (c < real_cols)[None, :]
    if DROPPING:
        row_hash = _mix32(global_rows ^ row_key.to(tl.uint32))
        column_hash = _mix32((c.to(tl.uint32) + col0.to(tl.uint32)) ^ column_key.to(tl.uint32))
        kept &= _mix32(row_hash[:, None] ^ column_hash[None, :]) >= threshold.to(tl.uint32)
    return kept


@triton.jit
def _kept(r, c, row0, col0, real_cols, row_key, column_key, threshold, DROPPING: tl.constexpr):
    """The keep decisions of the tile (r, c) of the block whose first element is (row0, col0)."""
    global_rows = r.to(tl.uint32) + row0.to(tl.uint32)
    return kept_rows(global_rows, c, col0, real_cols, row_key, column_key, threshold, DROPPING)


@triton.jit
def kept_scale(keep_bits, FLOAT64: tl.constexpr):
    """The scale of kept elements, passed as the bits of its value in the block's dtype."""
    if FLOAT64:
        value = keep_bits.to(tl.int64).to(tl.float64, bitcast=True)
    else:
        value = keep_bits.to(tl.int32).to(tl.float32, bitcast=True)
    return value


@triton.jit(do_not_specialize=PER_CALL)
def _scale_kernel(
    source,
    out,
    rows,
    cols,
    row_stride,
    col_stride,
    row0: tl.int64,
    col0: tl.int64,
    real_cols: tl.int64,
    row_key: tl.int64,
    column_key: tl.int64,
    threshold: tl.int64,
    keep_bits: tl.int64,
    DROPPING: tl.constexpr,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    r, c, inside = tile(rows, cols, BLOCK_ROWS, BLOCK_COLS)
    x = tl.load(source + r[:, None] * row_stride + c[None, :] * col_stride, mask=inside, other=0)
    kept = _kept(r, c, row0, col0, real_cols, row_key, column_key, threshold, DROPPING)
    scaled = tl.where(kept, x * kept_scale(keep_bits, FLOAT64), 0.0)
    tl.store(out + r[:, None] * cols + c[None, :], scaled, mask=inside)


@triton.jit(do_not_specialize=PER_CALL)
def _relu_scale_kernel(
    source,
    out,
    flag,
    rows,
    cols,
    row_stride,
    col_stride,
    row0: tl.int64,
    col0: tl.int64,
    real_cols: tl.int64,
    row_key: tl.int64,
    column_key: tl.int64,
    threshold: tl.int64,
    keep_bits: tl.int64,
    DROPPING: tl.constexpr,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    r, c, inside = tile(rows, cols, BLOCK_ROWS, BLOCK_COLS)
    x = tl.load(source + r[:, None] * row_stride + c[None, :] * col_stride, mask=inside, other=0)
    kept = (x > 0) & _kept(r, c, row0, col0, real_cols, row_key, column_key, threshold, DROPPING)
    at = r[:, None] * cols + c[None, :]
    tl.store(out + at, tl.where(kept, x * kept_scale(keep_bits, FLOAT64), 0.0), mask=inside)
    tl.store(flag + at, kept.to(tl.uint8), mask=inside)


@triton.jit(do_not_specialize=["keep_bits"])
def _scale_flagged_kernel(
    source,
    flag,
    out,
    rows,
    cols,
    row_stride,
    col_stride,
    keep_bits: tl.int64,
    FLOAT64: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    r, c, inside = tile(rows, cols, BLOCK_ROWS, BLOCK_COLS)
    x = tl.load(source + r[:, None] * row_stride + c[None, :] * col_stride, mask=inside, other=0)
    at = r[:, None] * cols + c[None, :]
    kept = tl.load(flag + at, mask=inside, other=0) != 0
    tl.store(out + at, tl.where(kept, x * kept_scale(keep_bits, FLOAT64), 0.0), mask=inside)


def scale_bits(keep_value: float, dtype: torch.dtype) -> int:
    """`keep_value` rounded to `dtype` (as the torch specification's `source * keep_value` rounds it), as
    the integer of its bits: ints reach a kernel exactly in every Triton mode, floats as float32."""
    if dtype == torch.float64:
        return struct.unpack("<q", struct.pack("<d", keep_value))[0]
    return struct.unpack("<i", struct.pack("<f", keep_value))[0]


def launch_shape(source: torch.Tensor) -> dict:
    """The launch grid, the layout arguments every kernel takes and its compile-time constants, for a 2D
    float32/float64 block (no fused multiply-add: products round as torch's do)."""
    if source.dim() != 2 or source.dtype not in (torch.float32, torch.float64):
        got = f"{source.dtype} {tuple(source.shape)}"
        raise ValueError(f"dropout kernels take 2D float32/float64 blocks, got {got}")
    rows, cols = source.shape
    block_cols = min(128, triton.next_power_of_2(max(cols, 1)))
    block_rows = TILE_ELEMENTS // block_cols
    return {
        "grid": (triton.cdiv(rows, block_rows), triton.cdiv(cols, block_cols)),
        "layout": (rows, cols, source.stride(0), source.stride(1)),
        "constants": {
            "FLOAT64": source.dtype == torch.float64,
            "BLOCK_ROWS": block_rows,
            "BLOCK_COLS": block_cols,
            "enable_fp_fusion": False,
        },
    }


def mask_arguments(spec: MaskSpec, block: Block | RowsBlock, cols: int) -> tuple:
    """(row0, col0, real columns of the block, row key, column key, threshold); a `RowsBlock`'s rows are
    not among them (row0 is 0)."""
    if isinstance(block, RowsBlock):
        block = (0, 0, block.first_column, block.columns)
    check_block(block)
    row0, _, col0, _ = block
    real_cols = max(0, min(cols, spec.width - col0))
    return (row0, col0, real_cols, spec.row_key, spec.column_key, spec.threshold)


def scale(source: torch.Tensor, spec: MaskSpec, block: Block) -> torch.Tensor:
    """source * (keep_value where kept, else 0), in one launch."""
    shape = launch_shape(source)
    out = torch.empty(source.shape, dtype=source.dtype, device=source.device)
    if out.numel():
        _scale_kernel[shape["grid"]](
            source,
            out,
            *shape["layout"],
            *mask_arguments(spec, block, source.shape[1]),
            scale_bits(spec.keep_value, source.dtype),
            DROPPING=spec.threshold > 0,
            **shape["constants"],
        )
    return out


def relu_scale(source: torch.Tensor, spec: MaskSpec, block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """relu(source) dropped and scaled, and the flag of the elements that passed, in one launch."""
    shape = launch_shape(source)
    out = torch.empty(source.shape, dtype=source.dtype, device=source.device)
    flag = torch.empty(source.shape, dtype=torch.bool, device=source.device)
    if out.numel():
        _relu_scale_kernel[shape["grid"]](
            source,
            out,
            flag.view(torch.uint8),
            *shape["layout"],
            *mask_arguments(spec, block, source.shape[1]),
            scale_bits(spec.keep_value, source.dtype),
            DROPPING=spec.threshold > 0,
            **shape["constants"],
        )
    return out, flag


def scale_flagged(source: torch.Tensor, flag: torch.Tensor, keep_value: float) -> torch.Tensor:
    """source * keep_value where `flag` (a contiguous bool block of the same shape), else 0."""
    shape = launch_shape(source)
    if flag.shape != source.shape or not flag.is_contiguous():
        raise ValueError(f"flag must be a contiguous {tuple(source.shape)} block, got {tuple(flag.shape)}")
    out = torch.empty(source.shape, dtype=source.dtype, device=source.device)
    if out.numel():
        _scale_flagged_kernel[shape["grid"]](
            source,
            flag.view(torch.uint8),
            out,
            *shape["layout"],
            scale_bits(keep_value, source.dtype),
            **shape["constants"],
        )
    return out
