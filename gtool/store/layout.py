"""Store layout v1 (docs/store-format.md): array paths, metadata keys and the codecs of every array."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zarr.codecs import BloscCodec, Crc32cCodec

if TYPE_CHECKING:
    from zarr.core.chunk_key_encodings import ChunkKeyEncodingParams

LAYOUT_VERSION = 1
META_KEY = "gtool"
PREDICTIONS_KEY = "gtool_predictions"
"""The attribute that describes a `gtool predict` output (docs/predict.md; its `complete` is set last): a Zarr
group of node arrays, not a graph store."""

PERM_ROWS = "perm/r"
PERM_COLS = "perm/c"
PERMS = {"r": PERM_ROWS, "c": PERM_COLS}
FEATURES = "nodes/features"
LABELS = {"r": "nodes/labels/r", "c": "nodes/labels/c"}
SPLIT = {"r": "nodes/split/r", "c": "nodes/split/c"}

SPLIT_CODES = {"train": 0, "valid": 1, "test": 2}
SPLIT_NONE = -1
LABEL_NONE = -1

TILE_FIELDS = ("row", "col", "val")
TILE_DTYPES = {"row": "int32", "col": "int32", "val": "float32"}
NODE_DTYPES = {
    PERM_ROWS: "int64",
    PERM_COLS: "int64",
    FEATURES: "float32",
    **{path: "int64" for path in LABELS.values()},
    **{path: "int8" for path in SPLIT.values()},
}
"""The dtype `gtool shard` gives each node array (docs/store-format.md, Arrays)."""
ENTRY_BYTES = 12
"""Bytes of one stored nonzero: its row, col and val."""
FEATURE_CHUNK_BYTES = 8 << 20
"""A feature chunk (of nodes/features, or of a predict output's arrays) holds whole rows, about this many
bytes of float32."""

CHUNK_CODECS = (BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"), Crc32cCodec())
"""The compressors of every array gtool writes: Blosc (LZ4 level 5, byte shuffle), then a crc32c checksum of
the compressed chunk, so that any damaged byte of a chunk fails its read. Measured on an R-MAT store
against Blosc Zstd level 1 (the codec before): tile rows 0.13 vs 0.10 of raw, columns 0.50 vs 0.50, values
0.90 vs 0.88, features 0.88 vs 0.85, at 2.3 to 3.4 times its encoding and 2 to 3 times its decoding speed;
compression was the largest single cost of `gtool shard`. Any Zarr v3 reader decodes it. Stores written
with other codecs (Blosc Zstd; plain Zstd, before checksums) still read: each array's zarr.json says."""


CHUNK_KEYS: ChunkKeyEncodingParams = {"name": "default", "separator": "."}
"""Chunk keys of every array gtool writes: Zarr v3's default encoding with "." between the parts, so a
chunk is the file ARRAY/c.I[.J] beside the array's zarr.json, with no folder of its own (ARRAY/c/I with
"/"). A store holds thousands of one-chunk tile arrays: the folders were a third of its file-system
entries, and making a file-system entry is the costliest part of writing a small tile. Any Zarr v3
reader follows the encoding its zarr.json names; stores written with "/" still read."""


def tile_group(matrix: int, i: int, j: int) -> str:
    """Group path of tile (i, j) of a matrix."""
    return f"adj/{matrix}/{i}_{j}"


def tile_array(matrix: int, i: int, j: int, field: str) -> str:
    """Path of one field (row, col or val) of tile (i, j)."""
    return f"{tile_group(matrix, i, j)}/{field}"


def feature_chunk_rows(num_features: int) -> int:
    """Rows per feature chunk (about FEATURE_CHUNK_BYTES of float32)."""
    return max(1, FEATURE_CHUNK_BYTES // (4 * max(1, num_features)))


def documented_dtype(path: str) -> str | None:
    """The dtype the format gives the array at `path` (a node array or a tile field), None for others."""
    if path in NODE_DTYPES:
        return NODE_DTYPES[path]
    field = path.rsplit("/", 1)[-1]
    return TILE_DTYPES[field] if path.startswith("adj/") and field in TILE_DTYPES else None
