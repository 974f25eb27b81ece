"""Bands: a dimension cut into g equal bands of size B = ceil(N / g) (N padded to g*B); band b covers
[b*B, (b+1)*B) of the padded index space, of which [b*B, min((b+1)*B, N)) are real rows."""

from __future__ import annotations

from dataclasses import dataclass


def ceil_div(a: int, b: int) -> int:
    """Integer ceiling of a / b for non-negative a and positive b."""
    return -(-a // b)


def band_size(num_nodes: int, bands: int) -> int:
    """Padded band size B = ceil(N / g)."""
    if bands < 1:
        raise ValueError(f"band count must be >= 1, got {bands}")
    return max(1, ceil_div(num_nodes, bands))


@dataclass(frozen=True)
class Band:
    """One band of a dimension: padded range [start, start + size) and its real part [start, stop)."""

    index: int
    start: int
    stop: int
    size: int

    @property
    def real(self) -> int:
        """Number of real (unpadded) indices in the band."""
        return max(0, self.stop - self.start)


def band(b: int, bands: int, num_nodes: int) -> Band:
    """Band b of `bands` equal bands over N indices."""
    size = band_size(num_nodes, bands)
    start = b * size
    return Band(index=b, start=min(start, num_nodes), stop=min(start + size, num_nodes), size=size)
