"""Every random number of training, derived from the seed and (layer, epoch, global coordinates), never
the rank: ranks that hold the same block draw the same numbers, and every grid shape trains alike.
Dropout masks are in `gtool.trainer.dropout`.
"""

from __future__ import annotations

import math

import torch

from gtool.store.values import SPLITMIX_GOLDEN, SPLITMIX_MIX1, SPLITMIX_MIX2

_MASK64 = (1 << 64) - 1


def derive_seed(*parts: int) -> int:
    """A 63-bit seed mixing `parts` with SplitMix64 (distinct tuples give unrelated streams)."""
    state = SPLITMIX_GOLDEN
    for part in parts:
        state = (state ^ (part & _MASK64)) * SPLITMIX_MIX1 & _MASK64
        state = (state ^ (state >> 31)) * SPLITMIX_MIX2 & _MASK64
        state ^= state >> 29
    return state >> 1


WEIGHTS, DENSE_WEIGHTS = 1, 4
"""Seed streams: the GCN layers' weights, the dense layers' (input projection 0, output head 1)."""


def initial_weight(
    seed: int, layer: int, fan_in: int, fan_out: int, dtype: torch.dtype, stream: int = WEIGHTS
) -> torch.Tensor:
    """Layer `layer`'s full fan_in x fan_out weight, Glorot-uniform (Kipf & Welling), the same everywhere."""
    generator = torch.Generator().manual_seed(derive_seed(seed, stream, layer))
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    weight = torch.rand(fan_in, fan_out, generator=generator, dtype=torch.float64) * (2 * limit) - limit
    return weight.to(dtype)
