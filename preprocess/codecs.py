"""Create arrays with the codecs of every array gtool writes (gtool.layout.CHUNK_CODECS)."""

from __future__ import annotations

from typing import Any

import zarr

from gtool import layout


def create_array(**kwargs: Any) -> zarr.Array:
    """zarr.create_array with gtool's codecs: compressed and checksummed chunks."""
    return zarr.create_array(compressors=layout.CHUNK_CODECS, **kwargs)
