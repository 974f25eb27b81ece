"""The CPU side of dropout: the keep decisions of `masks` computed inside the passes that use them.

Each kernel is one parallel pass over a block (rows split over threads), so a layer's dropout costs
about what the ReLU it is fused with costs, and no mask is ever materialized. A block's rows are given
by their global ids: consecutive for a `Block`, a mini-batch's members' places in the sample for a
`RowsBlock`. The integer arithmetic is
unsigned 64-bit on values below 2^32, exactly that of `masks.mix32`: the decisions are the same bits.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

from gtool.compiled import parallel_kernel
from gtool.trainer.nn.dropout.masks import MASK32, MIX_MULTIPLIERS, Block, MaskSpec, RowsBlock, check_block

_LOW = np.uint64(MASK32)
_M0, _M1 = (np.uint64(m) for m in MIX_MULTIPLIERS)


@njit(inline="always", cache=True)
def _mix32(x):
    x ^= x >> np.uint64(16)
    x = (x * _M0) & _LOW
    x ^= x >> np.uint64(15)
    x = (x * _M1) & _LOW
    return x ^ (x >> np.uint64(16))


@njit(inline="always", cache=True)
def row_hash(row_id, row_key):
    """The hash of a global row, computed once per row and shared by its elements' decisions."""
    return _mix32(np.uint64(row_id) ^ row_key)


@njit(inline="always", cache=True)
def kept(hashed, column, width, column_key, threshold):
    """Whether the element in global `column` of the row whose `row_hash` is `hashed` is kept."""
    if column >= width:
        return False
    return threshold == 0 or _mix32(hashed ^ _mix32(np.uint64(column) ^ column_key)) >= threshold


@parallel_kernel()
def _scale(source, out, row_ids, col0, width, row_key, column_key, threshold, keep_value):
    rows, cols = source.shape
    for i in prange(rows):
        hashed = row_hash(row_ids[i], row_key)
        for j in range(cols):
            keep = kept(hashed, col0 + j, width, column_key, threshold)
            out[i, j] = source[i, j] * keep_value if keep else 0.0


@parallel_kernel()
def _relu_scale(source, out, flag, row_ids, col0, width, row_key, column_key, threshold, keep_value):
    rows, cols = source.shape
    for i in prange(rows):
        hashed = row_hash(row_ids[i], row_key)
        for j in range(cols):
            value = source[i, j]
            keep = value > 0 and kept(hashed, col0 + j, width, column_key, threshold)
            out[i, j] = value * keep_value if keep else 0.0
            flag[i, j] = keep


@parallel_kernel()
def _scale_flagged(source, flag, out, keep_value):
    rows, cols = source.shape
    for i in prange(rows):
        for j in range(cols):
            out[i, j] = source[i, j] * keep_value if flag[i, j] else 0.0


def share_threads() -> int:
    """The threads of the passes: as many as torch uses (one rank of several must not take all), at most
    NUMBA_NUM_THREADS. One thread runs the serial compiles (gtool.compiled.ParallelKernel), which start no
    thread pool; more are set on numba's pool, whose launch (with the OpenMP layer) sets OpenMP's thread
    count, torch's too, to NUMBA_NUM_THREADS: torch's count is set back."""
    threads = torch.get_num_threads()
    shared = max(1, min(threads, numba.config.NUMBA_NUM_THREADS))
    if shared > 1:
        numba.set_num_threads(shared)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return shared


def mask_arguments(spec: MaskSpec, block: Block | RowsBlock) -> tuple:
    """(row ids, first column, width, keys): the coordinates and mask of a block's elements."""
    if isinstance(block, RowsBlock):
        row_ids, col0 = block.rows.to(torch.int64).contiguous().numpy(), block.first_column
        check_block((0, 0, col0, block.columns))
    else:
        check_block(block)
        row0, rows, col0, _ = block
        row_ids = np.arange(row0, row0 + rows, dtype=np.int64)
    keys = (np.uint64(spec.row_key), np.uint64(spec.column_key), np.uint64(spec.threshold))
    return (row_ids, col0, spec.width, *keys)


def scale(source: torch.Tensor, spec: MaskSpec, block: Block | RowsBlock) -> torch.Tensor:
    """source * (keep_value where kept, else 0) for a CPU block."""
    threads = share_threads()
    source = source.contiguous()
    out = torch.empty_like(source)
    keep_value = source.new_tensor(spec.keep_value).numpy()[()]
    _scale.on(threads)(source.numpy(), out.numpy(), *mask_arguments(spec, block), keep_value)
    return out


def relu_scale(
    source: torch.Tensor, spec: MaskSpec, block: Block | RowsBlock
) -> tuple[torch.Tensor, torch.Tensor]:
    """relu(source) dropped and scaled, and the flag of the elements that passed (positive and kept)."""
    threads = share_threads()
    source = source.contiguous()
    out = torch.empty_like(source)
    flag = torch.empty(source.shape, dtype=torch.bool)
    keep_value = source.new_tensor(spec.keep_value).numpy()[()]
    _relu_scale.on(threads)(
        source.numpy(), out.numpy(), flag.numpy(), *mask_arguments(spec, block), keep_value
    )
    return out, flag


def scale_flagged(source: torch.Tensor, flag: torch.Tensor, keep_value: float) -> torch.Tensor:
    """source * keep_value where `flag`, else 0."""
    threads = share_threads()
    source = source.contiguous()
    out = torch.empty_like(source)
    _scale_flagged.on(threads)(
        source.numpy(), flag.numpy(), out.numpy(), source.new_tensor(keep_value).numpy()[()]
    )
    return out
