"""Tile arrays of a store: their metadata, created with zarr.create_hierarchy by the tasks that write them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from functools import cache

import zarr
from zarr.abc.store import Store
from zarr.core.chunk_grids import RegularChunkGrid
from zarr.core.group import GroupMetadata
from zarr.core.metadata import ArrayV3Metadata
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


def tile_nodes(tiles: Iterable[tuple[int, int, int, int]]) -> dict[str, ArrayV3Metadata]:
    """Metadata of the row/col/val arrays of tiles given as (matrix, i, j, nnz)."""
    return {
        layout.tile_array(m, i, j, field): tile_metadata(layout.TILE_DTYPES[field], nnz)
        for m, i, j, nnz in tiles
        for field in layout.TILE_FIELDS
    }


def zarr_store(store: str) -> Store:
    """The zarr store object of a path or URL."""
    return FsspecStore.from_url(store) if is_url(store) else LocalStore(store)


def create_matrix_groups(store: str, matrices: Iterable[int]) -> None:
    """Create adj/M of each matrix, so that write tasks can then create their tiles' arrays below them
    concurrently (each tile's arrays are created by the one task that writes it)."""
    nodes = {f"adj/{m}": GroupMetadata() for m in matrices}
    for _ in zarr.create_hierarchy(store=zarr_store(store), nodes=nodes):
        pass
