"""Create every tile array of a store in one concurrent metadata write (zarr.create_hierarchy)."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import zarr
from zarr.core.chunk_grids import RegularChunkGrid
from zarr.storage import FsspecStore, LocalStore, MemoryStore

from gtool import layout
from gtool.preprocess.codecs import create_array
from gtool.preprocess.staging import is_url

TILE_CHUNK = 1 << 20


@cache
def _template(dtype: str):
    return create_array(store=MemoryStore(), shape=(1,), dtype=dtype, chunks=(1,)).metadata


def tile_metadata(dtype: str, nnz: int):
    """Zarr v3 metadata of a 1-D tile field of nnz entries, chunked by TILE_CHUNK."""
    chunk = max(1, min(nnz, TILE_CHUNK))
    return dataclasses.replace(
        _template(dtype), shape=(nnz,), chunk_grid=RegularChunkGrid(chunk_shape=(chunk,))
    )


def create_tile_arrays(store: str, tile_nnz: dict[int, np.ndarray]) -> None:
    """Create row/col/val arrays of every tile of every matrix, sized from the T x T counts."""
    nodes = {}
    for m, counts in tile_nnz.items():
        for (i, j), nnz in np.ndenumerate(counts):
            for field in layout.TILE_FIELDS:
                nodes[layout.tile_array(m, i, j, field)] = tile_metadata(layout.TILE_DTYPES[field], int(nnz))
    target = FsspecStore.from_url(store) if is_url(store) else LocalStore(store)
    for _ in zarr.create_hierarchy(store=target, nodes=nodes):
        pass
