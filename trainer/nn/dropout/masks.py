"""Dropout keep decisions as a pure function of (seed, layer l, epoch e, global row r, global column c):

    keep = mix(mix(r ^ row_key) ^ mix(c ^ column_key)) >= threshold        (32-bit unsigned arithmetic)

with (row_key, column_key) the halves of `derive_seed(seed, 2, l, e)`, `mix` the lowbias32 finalizer and
threshold = round(rate * 2^32). Nothing depends on the grid, rank or device, so every block is cut from
one global mask, replicas agree bitwise, CPU and CUDA draw the same masks and a run resumes exactly. This
module is the specification in plain torch; `kernels` computes the same decisions fused on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.trainer.nn.randomness import derive_seed

MASK32 = 0xFFFFFFFF
MIX_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)
"""lowbias32 (C. Wellons' hash prospector): x ^= x >> 16; x *= M0; x ^= x >> 15; x *= M1; x ^= x >> 16."""

Block = tuple[int, int, int, int]
"""(first row, rows, first column, columns) of a block in global, padded coordinates."""


def _as_int64_factor(multiplier: int) -> int:
    """`multiplier` as the int64 that is congruent to it mod 2^32 and below 2^31 in magnitude: its
    product with any 32-bit value then fits in int64 (no overflow), and the low 32 bits are the same."""
    return multiplier - (1 << 32) if multiplier >= 1 << 31 else multiplier


_FACTORS = tuple(_as_int64_factor(m) for m in MIX_MULTIPLIERS)


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 of an int64 tensor holding 32-bit unsigned values (the result, a new tensor, holds them
    too). After the first step the steps run in place: a block's mask allocates half as much, in half the
    time."""
    x = x ^ (x >> 16)
    x.mul_(_FACTORS[0]).bitwise_and_(MASK32)
    x ^= x >> 15
    x.mul_(_FACTORS[1]).bitwise_and_(MASK32)
    x ^= x >> 16
    return x


@dataclass(frozen=True)
class MaskSpec:
    """The dropout mask of one layer input in one epoch.

    Columns at or past `width` (the layer's real input width) are padding and are never kept.
    """

    row_key: int
    column_key: int
    threshold: int
    keep_value: float
    width: int

    @classmethod
    def of(
        cls, seed: int, layer: int, epoch: int, rate: float, width: int, step: int | None = None
    ) -> MaskSpec:
        """The mask of a full-graph epoch, or of step `step` of a mini-batch epoch (its own stream)."""
        key = derive_seed(seed, 2, layer, epoch) if step is None else derive_seed(seed, 3, layer, epoch, step)
        threshold = min(round(rate * 2**32), MASK32)
        return cls(key & MASK32, (key >> 32) & MASK32, threshold, 1.0 / (1.0 - rate), width)


@dataclass(frozen=True)
class RowsBlock:
    """A block whose rows are any global ids (a mini-batch's members: their places in the sorted sample),
    with columns [first_column, first_column + columns)."""

    rows: torch.Tensor
    first_column: int
    columns: int


def check_block(block: Block) -> None:
    """Coordinates must fit in 32 bits (over 4 billion nodes or columns is out of reach anyway)."""
    row0, rows, col0, cols = block
    if row0 + rows > 1 << 32 or col0 + cols > 1 << 32:
        raise ValueError(f"dropout block {block} is past the 2^32 rows or columns masks are defined for")


def keep_mask(spec: MaskSpec, block: Block | RowsBlock, device: torch.device) -> torch.Tensor:
    """The keep decisions (bool) of a block, in a dozen whole-block integer operations (at rate 0, a
    read-only broadcast of the real columns: nothing to hash)."""
    if isinstance(block, RowsBlock):
        row_ids, col0, cols = block.rows.to(device), block.first_column, block.columns
    else:
        check_block(block)
        row0, rows, col0, cols = block
        row_ids = torch.arange(row0, row0 + rows, dtype=torch.int64, device=device)
    column_ids = torch.arange(col0, col0 + cols, dtype=torch.int64, device=device)
    real_columns = (column_ids < spec.width).unsqueeze(0)
    if spec.threshold == 0:  # every hash is at least 0: no hash to compute
        return real_columns.expand(row_ids.shape[0], cols)
    row_hash = mix32(row_ids ^ spec.row_key)
    column_hash = mix32(column_ids ^ spec.column_key)
    keep = mix32(row_hash.unsqueeze(1) ^ column_hash.unsqueeze(0)) >= spec.threshold
    return keep & real_columns
