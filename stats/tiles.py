"""How a stored matrix spreads over its tiles: nonzeros per tile and per band, and the rows and columns
each tile touches (what a sparsity-aware exchange would send instead of whole bands)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.store.metadata import spread, tile_stats
from gtool.store.reader import Store, TileData


class TouchedLines:
    """Tile visitor: the distinct rows and distinct columns holding nonzeros, per tile of each matrix."""

    def __init__(self, store: Store):
        t = store.tiles
        self.matrices = store.matrices
        self.rows = {m: np.zeros((t, t), dtype=np.int64) for m in self.matrices}
        self.cols = {m: np.zeros((t, t), dtype=np.int64) for m in self.matrices}
        self._seen = np.zeros(store.tile_size, dtype=bool)

    def visit(self, matrix: int, i: int, j: int, tile: TileData) -> None:
        if tile.nnz == 0:
            return
        self.rows[matrix][i, j] = 1 + np.count_nonzero(tile.row[1:] != tile.row[:-1])
        self._seen[tile.col] = True
        self.cols[matrix][i, j] = np.count_nonzero(self._seen)
        self._seen[tile.col] = False


@dataclass(frozen=True)
class MatrixTileStats:
    """Tile-level figures of one stored matrix (T x T arrays)."""

    matrix: int
    num_nodes: int
    tile_nnz: np.ndarray
    nonzero_rows: np.ndarray
    nonzero_cols: np.ndarray

    def summary(self) -> dict[str, Any]:
        """Everything `gtool stats` prints for the matrix, JSON-ready."""
        return {
            "tile_nnz": tile_stats(self.tile_nnz),
            "row_band_nnz": band_summary(self.tile_nnz.sum(axis=1)),
            "col_band_nnz": band_summary(self.tile_nnz.sum(axis=0)),
            "nonzero_rows": touched_summary(self.nonzero_rows, self.num_nodes),
            "nonzero_cols": touched_summary(self.nonzero_cols, self.num_nodes),
        }


def band_summary(band_nnz: np.ndarray) -> dict[str, Any]:
    """Spread of the nonzeros of the T row (or column) bands, with the counts."""
    return {**spread(band_nnz), "nnz": band_nnz.astype(int).tolist()}


def touched_summary(touched: np.ndarray, num_nodes: int) -> dict[str, Any]:
    """Spread of the rows (columns) touched per tile; `fraction`: their total over the T * N a dense
    exchange of whole tile rows (columns) would send."""
    total = int(touched.sum())
    lines = touched.shape[0] * num_nodes
    return {
        **spread(touched),
        "total": total,
        "fraction": total / lines if lines else 0.0,
        "per_tile": touched.astype(int).tolist(),
    }


def matrix_tile_stats(store: Store, touched: TouchedLines) -> list[MatrixTileStats]:
    """Tile figures of every stored matrix, from the metadata counts and a finished TouchedLines scan."""
    return [
        MatrixTileStats(m, store.num_nodes, store.tile_nnz(m), touched.rows[m], touched.cols[m])
        for m in store.matrices
    ]
