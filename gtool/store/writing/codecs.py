"""Create arrays with the codecs and chunk keys of every array gtool writes (gtool.store.layout)."""

from __future__ import annotations

from typing import Any

import zarr
from zarr.core.array_spec import ArrayConfig

from gtool.store import layout

EVERY_CHUNK = ArrayConfig(order="C", write_empty_chunks=True)


def create_array(**kwargs: Any) -> zarr.Array:
    """zarr.create_array with gtool's codecs (compressed and checksummed chunks) and chunk keys, storing
    every chunk, also one equal to the fill value (zarr skips those by default), so that a missing chunk
    file always means damage."""
    return zarr.create_array(
        compressors=layout.CHUNK_CODECS,
        chunk_key_encoding=layout.CHUNK_KEYS,
        config=EVERY_CHUNK,
        **kwargs,
    )
