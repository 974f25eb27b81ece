"""Reading stored arrays so that a damaged chunk is an error naming the array and the chunk."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.metadata import ArrayV3Metadata

from gtool.errors import DamagedChunkError

Selection = tuple[slice, ...]
NAMED_CHUNKS = 5
"""Bad chunks an error names one by one (the rest are counted)."""
BLOCK_BYTES = 8 << 20
"""About how many decoded bytes a block read of node rows holds."""


def has_checksums(array: zarr.Array) -> bool:
    """Whether the array's chunks carry a crc32c checksum (stores written before checksums do not)."""
    metadata = array.metadata
    return isinstance(metadata, ArrayV3Metadata) and any(isinstance(c, Crc32cCodec) for c in metadata.codecs)


def read_checked(array: zarr.Array, selection: Selection = (), where: str | None = None) -> np.ndarray:
    """array[selection] (slices, the missing trailing ones whole); a chunk that fails its checksum or
    cannot be decoded raises DamagedChunkError naming `where`, the array and every bad chunk."""
    region = full_region(array, selection)
    try:
        return np.asarray(array[region])
    except Exception as exc:  # zarr reports a damaged chunk as ValueError or as a codec's own error
        raise damaged_chunk_error(array, region, exc, where) from None


def block_rows(array: zarr.Array) -> int:
    """Rows per read: whole chunks of rows holding about BLOCK_BYTES when decoded (at least one chunk).

    Sized by the stored row width, not the selected columns: zarr decodes whole chunks.
    """
    chunk_rows = int(array.chunks[0])
    stored_row_bytes = int(np.prod(array.chunks[1:], dtype=np.int64)) * array.dtype.itemsize
    return chunk_rows * max(1, BLOCK_BYTES // max(1, stored_row_bytes * chunk_rows))


def full_region(array: zarr.Array, selection: Selection = ()) -> Selection:
    """The selection with steps of 1, in bounds, one slice per dimension."""
    padded = tuple(selection) + (slice(None),) * (array.ndim - len(selection))
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(padded, array.shape, strict=True))


def chunk_regions(array: zarr.Array, region: Selection) -> Iterator[tuple[tuple[int, ...], Selection]]:
    """(chunk coordinates, the chunk's whole region) of every chunk that `region` overlaps."""
    spans = [range(r.start // c, -(-r.stop // c)) for r, c in zip(region, array.chunks, strict=True)]
    for coords in itertools.product(*spans):
        yield (
            coords,
            tuple(
                slice(k * c, min((k + 1) * c, n))
                for k, c, n in zip(coords, array.chunks, array.shape, strict=True)
            ),
        )


def damaged_chunk_error(
    array: zarr.Array, region: Selection, exc: Exception, where: str | None
) -> DamagedChunkError:
    """The error for a failed read of `region`: each chunk is read again alone to name the bad ones."""
    bad: list[tuple[tuple[int, ...] | None, Exception]] = []
    for coords, chunk in chunk_regions(array, region):
        try:
            array[chunk]
        except Exception as chunk_exc:  # same kinds as in read_checked
            bad.append((coords, chunk_exc))
    if not bad:  # the chunks read alone: report the failure as it came
        bad = [(None, exc)]
    names = ", ".join(chunk_name(coords) for coords, _ in bad[:NAMED_CHUNKS])
    if len(bad) > NAMED_CHUNKS:
        names += f" and {len(bad) - NAMED_CHUNKS} more"
    prefix = f"{where}: " if where else ""
    return DamagedChunkError(f"{prefix}array {array.path}, {names}: {describe_failure(bad[0][1])}")


def chunk_name(coords: tuple[int, ...] | None) -> str:
    if coords is None:
        return "a chunk"
    return f"chunk {coords[0]}" if len(coords) == 1 else f"chunk ({', '.join(map(str, coords))})"


def describe_failure(exc: Exception) -> str:
    """A damaged chunk's failure in words (a checksum mismatch, or the codec's own error)."""
    if "checksum" in str(exc).lower():
        return "stored checksum does not match the chunk's bytes (the chunk is damaged)"
    return f"cannot be decoded ({type(exc).__name__}: {exc})"
