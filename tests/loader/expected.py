"""What a rank holds, worked out from docs/3d-gcn.md alone (no gtool geometry), to check gtool against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# (row axis, contraction axis, depth axis) of layers 0, 1, 2: (x, y, z) -> (z, x, y) -> (y, z, x)
LAYER_AXES = [(0, 1, 2), (2, 0, 1), (1, 2, 0)]
"""The roles of aggregate-first layers."""

Layers = int | Sequence[bool]
"""A number of aggregate-first layers, or each layer's order (True: transform-first)."""


def orders_of(layers: Layers) -> list[bool]:
    return [False] * layers if isinstance(layers, int) else list(layers)


def layer_axes(layers: Layers) -> list[tuple[int, int, int]]:
    """(a, b, c) of every layer: layer 0 (x, y, z); the next layer's input is the output block, [a, b]
    after an aggregate-first layer, so (c, a, b), and [c, a] after a transform-first one, so (b, c, a)."""
    roles, every = (0, 1, 2), []
    for transform_first in orders_of(layers):
        every.append(roles)
        a, b, c = roles
        roles = (b, c, a) if transform_first else (c, a, b)
    return every


def row_axes(layers: Layers) -> list[int]:
    """The axis of each layer's adjacency and output rows: a, or c transform-first."""
    return [c if tf else a for (a, _, c), tf in zip(layer_axes(layers), orders_of(layers), strict=True)]


@dataclass(frozen=True)
class Range:
    """Band `index` of `bands` over n: real indices [start, stop), padded size `size`."""

    start: int
    stop: int
    size: int


def band_range(index: int, bands: int, n: int) -> Range:
    size = -(-n // bands)
    return Range(min(index * size, n), min((index + 1) * size, n), size)


def coords(dims: tuple[int, int, int], rank: int) -> tuple[int, int, int]:
    """(x, y, z) with rank = (x * Gy + y) * Gz + z."""
    _, gy, gz = dims
    return rank // (gy * gz), rank // gz % gy, rank % gz


@dataclass(frozen=True)
class LayerRect:
    matrix: int
    rows: Range
    cols: Range


def layer_rects(dims: tuple[int, int, int], rank: int, layers: Layers, n: int, two: bool) -> list[LayerRect]:
    """Layer l multiplies A_{l mod 2}[band of its row axis, band of its contraction axis]."""
    xyz = coords(dims, rank)
    rects = []
    for layer, ((_, b, _), r) in enumerate(zip(layer_axes(layers), row_axes(layers), strict=True)):
        rects.append(
            LayerRect(layer % 2 if two else 0, band_range(xyz[r], dims[r], n), band_range(xyz[b], dims[b], n))
        )
    return rects


def feature_ranges(dims: tuple[int, int, int], rank: int, n: int, f: int) -> tuple[Range, Range]:
    """Layer 0's input block: rows band y of Gy, columns band z of Gz over the F features."""
    _, y, z = coords(dims, rank)
    return band_range(y, dims[1], n), band_range(z, dims[2], f)


def label_range(dims: tuple[int, int, int], rank: int, layers: Layers, n: int) -> tuple[Range, str]:
    """The last layer's row band, and its order: pr ('r') when L is odd, pc ('c') when even."""
    r = row_axes(layers)[-1]
    return band_range(coords(dims, rank)[r], dims[r], n), "r" if len(orders_of(layers)) % 2 else "c"


def tiles_overlapped(rects: list[LayerRect], n: int, tiles: int) -> set[tuple[int, int, int]]:
    """(matrix, i, j) of every stored tile some rectangle overlaps."""
    size = -(-n // tiles)
    needed = set()
    for rect in rects:
        if rect.rows.start < rect.rows.stop and rect.cols.start < rect.cols.stop:
            for i in range(rect.rows.start // size, -(-rect.rows.stop // size)):
                for j in range(rect.cols.start // size, -(-rect.cols.stop // size)):
                    needed.add((rect.matrix, i, j))
    return needed
