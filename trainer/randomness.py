"""Every random number of training, derived from (seed, layer, epoch, global coordinates), never the rank.

Ranks that hold the same block therefore draw the same numbers, and because masks are drawn per fixed
global chunk of rows (not per shard), a run gives the same result on every grid shape.
"""

from __future__ import annotations

import math

import torch

MASK_CHUNK_ROWS = 512
_MASK64 = (1 << 64) - 1


def derive_seed(*parts: int) -> int:
    """A 63-bit seed mixing `parts` with SplitMix64 (distinct tuples give unrelated streams)."""
    state = 0x9E3779B97F4A7C15
    for part in parts:
        state = (state ^ (part & _MASK64)) * 0xBF58476D1CE4E5B9 & _MASK64
        state = (state ^ (state >> 31)) * 0x94D049BB133111EB & _MASK64
        state ^= state >> 29
    return state >> 1


def initial_weight(seed: int, layer: int, fan_in: int, fan_out: int, dtype: torch.dtype) -> torch.Tensor:
    """Layer `layer`'s full fan_in x fan_out weight, Glorot-uniform (Kipf & Welling), the same everywhere."""
    generator = torch.Generator().manual_seed(derive_seed(seed, 1, layer))
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    weight = torch.rand(fan_in, fan_out, generator=generator, dtype=torch.float64) * (2 * limit) - limit
    return weight.to(dtype)


def dropout_scale(
    seed: int,
    layer: int,
    epoch: int,
    block: tuple[int, int, int, int],
    width: int,
    rate: float,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """Dropout multipliers (0 or 1 / (1 - rate)) of a block of a layer input `width` columns wide.

    `block` is (first row, rows, first column, columns) in global, padded coordinates; columns at or past
    `width` are padding and get 0. Row chunk k (rows [k * MASK_CHUNK_ROWS, ...)) is drawn whole, `width`
    columns, from a generator seeded by (seed, layer, epoch, k); the block takes its part of each chunk.
    """
    row0, num_rows, col0, num_cols = block
    real_cols = max(0, min(num_cols, width - col0))
    scale = torch.zeros(num_rows, num_cols, dtype=dtype, device=device)
    keep_value = 1.0 / (1.0 - rate)
    generator = torch.Generator(device=device)
    for chunk in range(row0 // MASK_CHUNK_ROWS, -(-(row0 + num_rows) // MASK_CHUNK_ROWS)):
        start = chunk * MASK_CHUNK_ROWS
        lo, hi = max(row0, start), min(row0 + num_rows, start + MASK_CHUNK_ROWS)
        generator.manual_seed(derive_seed(seed, 2, layer, epoch, chunk))
        draws = torch.rand(MASK_CHUNK_ROWS, width, generator=generator, device=device)
        keep = draws[lo - start : hi - start, col0 : col0 + real_cols] >= rate
        scale[lo - row0 : hi - row0, :real_cols].masked_fill_(keep, keep_value)
    return scale
