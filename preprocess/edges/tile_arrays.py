"""Tile arrays of a store: their metadata, and the groups above them."""

from __future__ import annotations

from zarr.core.metadata import ArrayV3Metadata

from gtool.store.writing.chunk_writer import ChunkSink, array_metadata

TILE_CHUNK = 1 << 20


def tile_metadata(dtype: str, nnz: int) -> ArrayV3Metadata:
    """Zarr v3 metadata of a 1-D tile field of nnz entries, chunked by TILE_CHUNK."""
    return array_metadata(dtype, (nnz,), (max(1, min(nnz, TILE_CHUNK)),))


def create_matrix_groups(store: str, matrices: list[int]) -> None:
    """Create adj and adj/M of each matrix; the write tasks then create their tiles below them."""
    sink = ChunkSink(store)
    for path in ["adj"] + [f"adj/{m}" for m in matrices]:
        sink.put_group(path)
