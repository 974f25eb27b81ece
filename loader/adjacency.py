"""One adjacency shard A_m[row band, col band]: its tiles read, cut, merged into CSR, and transposed."""

from __future__ import annotations

from itertools import groupby

import numpy as np
import torch

from gtool.geometry.layers import LayerGeometry
from gtool.loader.csr import CsrBuilder, transpose
from gtool.loader.rank_data import AdjacencyShard, ReadStats
from gtool.loader.tiles import ReadAhead, cut_tile, read_tiles, tile_bytes
from gtool.store.reader import Store


def load_adjacency_shard(
    store: Store,
    shard: LayerGeometry,
    reads: ReadAhead,
    stats: ReadStats,
    device: torch.device | str = "cpu",
    transposed: bool = True,
) -> AdjacencyShard:
    """Read the tiles a shard overlaps and build its CSR matrix (padded shape) and CSR transpose; without
    `transposed`, no transpose and int32 indices where they fit (a mini-batch run's shards: its cuts
    read them and transpose their own blocks).

    Tiles arrive in (i, j) order; the tiles of one tile row cover a contiguous block of the shard's rows
    and are merged into it at once, so at most one tile row plus the read-ahead is held.
    """
    cuts = shard.tiles(store.num_nodes, store.tiles)
    tile_nnz = store.tile_nnz(shard.matrix)
    capacity = int(sum(tile_nnz[c.i, c.j] for c in cuts))
    builder = CsrBuilder((shard.rows.size, shard.inputs.size), capacity, np.float32, narrow=not transposed)
    tiles = read_tiles(store, shard.matrix, cuts, reads)
    for _, group in groupby(tiles, key=lambda item: item[0].i):
        tile_row = list(group)
        pieces = []
        for cut, tile in tile_row:
            stats.add_tile(tile_bytes(tile))
            _, (col0, col1) = store.tile_bounds(cut.i, cut.j)
            pieces.append(cut_tile(tile, cut, col1 - col0))
        first = tile_row[0][0]
        builder.add_row_block(first.row_lo + first.row_offset, first.row_hi - first.row_lo, pieces)
        del tile_row, pieces  # free this tile row before the next one is gathered
    matrix = builder.finish()
    return AdjacencyShard(
        matrix_id=shard.matrix,
        row_band=shard.rows,
        col_band=shard.inputs,
        matrix=matrix.to_torch(device),
        transpose=transpose(matrix).to_torch(device) if transposed else None,
    )
