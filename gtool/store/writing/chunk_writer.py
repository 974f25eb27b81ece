"""Write new Zarr v3 arrays whole, chunk by chunk, from the task that computes them.

zarr's write path hops to a thread for every store operation (existence checks, metadata, each chunk)
and reads back a chunk before a partial write: for the thousands of small tile arrays of a store that
cost more than the computing and compressing of their entries. A task here encodes each chunk itself
with the array's own codec objects (so the bytes are exactly what zarr writes) and stores it in one
call. Edge chunks are padded with the fill value to the full chunk shape, as Zarr v3 stores them; every
chunk is written, even one equal to the fill value, so a missing chunk file always means damage.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import zarr
from zarr.abc.store import Store
from zarr.core.array_spec import ArraySpec, parse_array_config
from zarr.core.buffer import Buffer, NDBuffer, default_buffer_prototype
from zarr.core.chunk_grids import RegularChunkGrid
from zarr.core.common import JSON
from zarr.core.group import GroupMetadata
from zarr.core.metadata import ArrayV3Metadata
from zarr.core.sync import sync
from zarr.storage import FsspecStore, LocalStore, MemoryStore

from gtool.store.writing.codecs import create_array
from gtool.store.writing.staging import is_url, local_path


@runtime_checkable
class SyncEncoder(Protocol):
    """A zarr codec's synchronous encoder: zarr's codecs have one (its own write path calls it), though
    zarr's types for a codec do not say so."""

    def _encode_sync(self, chunk_data: Any, chunk_spec: ArraySpec) -> NDBuffer | Buffer | None: ...


@cache
def _template(dtype: str, ndim: int) -> tuple[ArrayV3Metadata, dict[str, JSON]]:
    """Metadata of an array of gtool's codecs, and its JSON document (made once: zarr is slow to make one)."""
    metadata = create_array(store=MemoryStore(), shape=(1,) * ndim, dtype=dtype, chunks=(1,) * ndim).metadata
    assert isinstance(metadata, ArrayV3Metadata)  # create_array makes Zarr v3 arrays by default
    return metadata, metadata.to_dict()


def array_metadata(dtype: str, shape: tuple[int, ...], chunks: tuple[int, ...]) -> ArrayV3Metadata:
    """Zarr v3 metadata of an array with gtool's codecs and chunk keys (gtool.store.layout)."""
    return dataclasses.replace(
        _template(dtype, len(shape))[0], shape=shape, chunk_grid=RegularChunkGrid(chunk_shape=chunks)
    )


def array_document(metadata: ArrayV3Metadata) -> Buffer:
    """The zarr.json of an array made by `array_metadata`: its template's document, shape and chunks."""
    template = _template(str(metadata.dtype.to_native_dtype()), len(metadata.shape))[1]
    document = {**template, "shape": metadata.shape, "chunk_grid": metadata.chunk_grid.to_dict()}
    text = json.dumps(document, allow_nan=True, indent=zarr.config.get("json_indent"))
    return default_buffer_prototype().buffer.from_bytes(text.encode())


_GROUP_DOCUMENT = GroupMetadata().to_buffer_dict(default_buffer_prototype())["zarr.json"]


def zarr_store(store: str) -> Store:
    """The zarr store object of a path or URL."""
    return FsspecStore.from_url(store) if is_url(store) else LocalStore(store)


class ChunkSink:
    """Where a task puts encoded chunks and metadata documents: files of a local store, written
    directly, or any other zarr store (fsspec URLs) through its own API."""

    def __init__(self, store: str):
        self.root = None if is_url(store) else Path(local_path(store))
        self.store = zarr_store(store) if self.root is None else None
        self.folders: set[Path] = set()

    def put(self, key: str, data: Buffer) -> None:
        if self.store is not None:
            sync(self.store.set(key, data))
            return
        assert self.root is not None  # a sink has a store object or a root folder
        path = self.root / key
        if path.parent not in self.folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.folders.add(path.parent)
        with open(path, "wb") as file:
            file.write(data.as_buffer_like())

    def put_array(self, path: str, metadata: ArrayV3Metadata) -> None:
        """The zarr.json of an array made by `array_metadata`, at `path`."""
        self.put(f"{path}/zarr.json", array_document(metadata))

    def put_group(self, path: str) -> None:
        """The zarr.json of a group without attributes, at `path`."""
        self.put(f"{path}/zarr.json", _GROUP_DOCUMENT)


def encode_chunk(metadata: ArrayV3Metadata, coords: tuple[int, ...], block: np.ndarray) -> Buffer:
    """One chunk's stored bytes: `block` padded to the chunk shape, through every codec of the array."""
    chunk_shape = metadata.chunks
    if block.shape != chunk_shape:
        padded = np.full(chunk_shape, metadata.fill_value, dtype=block.dtype)
        padded[tuple(slice(0, s) for s in block.shape)] = block
        block = padded
    prototype = default_buffer_prototype()
    spec = metadata.get_chunk_spec(coords, parse_array_config(None), prototype)
    native = np.ascontiguousarray(block, dtype=metadata.dtype.to_native_dtype())
    data: NDBuffer | Buffer | None = prototype.nd_buffer.from_numpy_array(native)
    for codec in metadata.codecs:
        if not isinstance(codec, SyncEncoder):
            raise TypeError(f"zarr codec {codec!r} has no synchronous encoder")
        data = codec._encode_sync(data, spec)
    if not isinstance(data, Buffer):
        raise TypeError(f"{metadata.codecs} encoded a chunk to {type(data).__name__}, not bytes")
    return data


def write_chunk(sink: ChunkSink, path: str, metadata: ArrayV3Metadata, index: int, block: np.ndarray) -> None:
    """Chunk `index` along the first axis of the array at `path` (whole along the other axes)."""
    coords = (index,) + (0,) * (len(metadata.shape) - 1)
    sink.put(f"{path}/{metadata.encode_chunk_key(coords)}", encode_chunk(metadata, coords, block))


class AppendWriter:
    """Writes a new 1-D array from consecutive pieces: full chunks as soon as they fill, the last (padded)
    one and the metadata at `close`, which checks that exactly `shape[0]` entries came."""

    def __init__(self, sink: ChunkSink, path: str, metadata: ArrayV3Metadata):
        self.sink, self.path, self.metadata = sink, path, metadata
        self.chunk = metadata.chunks[0]
        self.pending: list[np.ndarray] = []
        self.pending_size = 0
        self.written = 0

    def append(self, values: np.ndarray) -> None:
        self.pending.append(values)
        self.pending_size += values.size
        if self.pending_size >= self.chunk:
            values = np.concatenate(self.pending)
            full = values.size // self.chunk * self.chunk
            for start in range(0, full, self.chunk):
                self._emit(values[start : start + self.chunk])
            self.pending = [values[full:]]
            self.pending_size = values.size - full

    def close(self) -> None:
        if self.pending_size:
            self._emit(np.concatenate(self.pending))
        if self.written != self.metadata.shape[0]:
            expected = self.metadata.shape[0]
            raise RuntimeError(f"{self.path}: {self.written} entries written, {expected} expected")
        self.sink.put_array(self.path, self.metadata)

    def _emit(self, values: np.ndarray) -> None:
        write_chunk(self.sink, self.path, self.metadata, self.written // self.chunk, values)
        self.written += values.size
