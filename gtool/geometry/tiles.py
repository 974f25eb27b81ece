"""Tiles: a T x T grid over the N x N matrix, tile size S = ceil(N / T); tile k covers [k*S, min((k+1)*S, N)).

A tile cut is the part of a stored tile inside a rectangle (a rank's shard of bands)."""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.bands import Band, ceil_div


def tile_size(num_nodes: int, tiles: int) -> int:
    """Tile size S = ceil(N / T)."""
    if tiles < 1:
        raise ValueError(f"tile count must be >= 1, got {tiles}")
    return max(1, ceil_div(num_nodes, tiles))


def tile_range(k: int, size: int, num_nodes: int) -> tuple[int, int]:
    """Half-open index range [start, stop) of tile k (may be empty past N when T does not divide N)."""
    start = min(k * size, num_nodes)
    return start, min((k + 1) * size, num_nodes)


@dataclass(frozen=True)
class TileCut:
    """The part of stored tile (i, j) inside a rectangle, in tile-local and rectangle-local terms."""

    i: int
    j: int
    row_lo: int
    row_hi: int
    col_lo: int
    col_hi: int
    row_offset: int
    col_offset: int


def tiles_for_rect(rows: tuple[int, int], cols: tuple[int, int], num_nodes: int, tiles: int) -> list[TileCut]:
    """Stored tiles overlapping the rectangle rows x cols (half-open, global indices), with their cuts.

    Each cut keeps tile-local rows in [row_lo, row_hi) and columns in [col_lo, col_hi); an entry (r, c)
    kept maps to rectangle-local (r + row_offset, c + col_offset).
    """
    size = tile_size(num_nodes, tiles)
    cuts: list[TileCut] = []
    r0, r1 = rows
    c0, c1 = cols
    r1, c1 = min(r1, num_nodes), min(c1, num_nodes)
    if r0 >= r1 or c0 >= c1:
        return cuts
    for i in range(r0 // size, ceil_div(r1, size)):
        ti0, ti1 = tile_range(i, size, num_nodes)
        lo_r, hi_r = max(r0, ti0), min(r1, ti1)
        for j in range(c0 // size, ceil_div(c1, size)):
            tj0, tj1 = tile_range(j, size, num_nodes)
            lo_c, hi_c = max(c0, tj0), min(c1, tj1)
            cuts.append(
                TileCut(
                    i=i,
                    j=j,
                    row_lo=lo_r - ti0,
                    row_hi=hi_r - ti0,
                    col_lo=lo_c - tj0,
                    col_hi=hi_c - tj0,
                    row_offset=ti0 - r0,
                    col_offset=tj0 - c0,
                )
            )
    return cuts


def tiles_for_bands(rows: Band, cols: Band, num_nodes: int, tiles: int) -> list[TileCut]:
    """Stored tiles overlapping the real part of the rectangle rows x cols, with their cuts."""
    return tiles_for_rect((rows.start, rows.stop), (cols.start, cols.stop), num_nodes, tiles)
