"""Reading stored tiles concurrently and in order, checking them, and cutting them down to a rectangle."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import numpy as np

from gtool.geometry.tiles import TileCut
from gtool.loader.csr import INDEX, RowPiece
from gtool.store import layout
from gtool.store.reader import Store, TileData


def tile_bytes(tile: TileData) -> int:
    """Decoded size of a tile's row, col and val arrays."""
    return tile.row.nbytes + tile.col.nbytes + tile.val.nbytes


@dataclass(frozen=True)
class ReadAhead:
    """How tiles are read: on `executor`, at most `max_tiles` tiles and about `max_bytes` decoded bytes
    ahead of their consumer (always at least one tile)."""

    executor: Executor
    max_tiles: int
    max_bytes: int


def read_tiles(
    store: Store, matrix: int, cuts: Sequence[TileCut], reads: ReadAhead
) -> Iterator[tuple[TileCut, TileData]]:
    """The tiles of `cuts` in order, read concurrently within `reads`' limits (sizes from tile nnz)."""
    tile_nnz = store.tile_nnz(matrix)
    upcoming = deque(cuts)
    pending: deque[tuple[TileCut, int, Future[TileData]]] = deque()
    ahead = 0

    def read_ahead() -> None:
        nonlocal ahead
        while upcoming:
            size = int(tile_nnz[upcoming[0].i, upcoming[0].j]) * layout.ENTRY_BYTES
            if pending and (len(pending) >= reads.max_tiles or ahead + size > reads.max_bytes):
                return
            cut = upcoming.popleft()
            pending.append((cut, size, reads.executor.submit(store.read_tile, matrix, cut.i, cut.j)))
            ahead += size

    read_ahead()
    try:
        while pending:
            cut, size, future = pending.popleft()
            tile = future.result()
            ahead -= size
            read_ahead()
            yield cut, tile
    finally:
        for _, _, future in pending:
            future.cancel()


def cut_tile(tile: TileData, cut: TileCut, tile_width: int) -> RowPiece:
    """The entries of a tile inside its cut: rows relative to the cut's first row, rectangle-local columns."""
    bounds = np.array([cut.row_lo, cut.row_hi], dtype=tile.row.dtype)  # same dtype: no copy of tile.row
    lo, hi = np.searchsorted(tile.row, bounds)
    rows, cols, values = tile.row[lo:hi], tile.col[lo:hi], tile.val[lo:hi]
    if cut.col_lo > 0 or cut.col_hi < tile_width:
        keep = (cols >= cut.col_lo) & (cols < cut.col_hi)
        rows, cols, values = rows[keep], cols[keep], values[keep]
    if cut.row_lo:
        rows = rows - cut.row_lo
    return RowPiece(rows=rows, cols=np.add(cols, cut.col_offset, dtype=INDEX), values=values)
