"""Reading stored arrays so that a damaged chunk is an error naming the array and the chunk."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.metadata import ArrayV3Metadata
from zarr.core.sync import sync

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


def read_checked(
    array: zarr.Array, selection: Selection = (), where: str | None = None, *, every_chunk: bool = True
) -> np.ndarray:
    """array[selection] (slices, the missing trailing ones whole); a chunk that fails its checksum or
    cannot be decoded raises DamagedChunkError naming `where`, the array and every bad chunk, and so does
    a missing chunk when `every_chunk` (the store's writer stored every chunk: StoreMeta.every_chunk).

    Zarr reads a missing chunk as its fill value, so without the check a deleted chunk file of labels or
    features would read as zeros. Only chunks whose part of the result is all fill value are looked up,
    so reads of real data cost no look-up at all."""
    region = full_region(array, selection)
    try:
        data = np.asarray(array[region])
    except Exception as exc:  # zarr reports a damaged chunk as ValueError or as a codec's own error
        raise damaged_chunk_error(array, region, exc, where) from None
    if every_chunk and (absent := missing_chunks(array, region, data)):
        raise DamagedChunkError(f"{where + ': ' if where else ''}{missing_chunks_text(array, absent)}")
    return data


def chunk_key(array: zarr.Array, coords: tuple[int, ...]) -> str:
    """The store key of one chunk of the array."""
    key = array.metadata.encode_chunk_key(coords)
    return f"{array.store_path.path}/{key}" if array.store_path.path else key


def missing_chunks(array: zarr.Array, region: Selection, data: np.ndarray) -> list[tuple[int, ...]]:
    """Coordinates of the chunks `region` overlaps that the store does not hold, looked up (in one round)
    only for those whose part of `data` (array[region]) is all fill value, as a missing chunk reads."""
    coords = [c for c, chunk in chunk_regions(array, region) if all_fill(data[part(chunk, region)], array)]
    return stored_absent(array, coords)


def stored_absent(array: zarr.Array, coords: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Those of the chunks `coords` that the store does not hold (looked up in one round)."""
    if not coords:
        return []
    store = array.store_path.store

    async def present() -> list[bool]:
        return await asyncio.gather(*(store.exists(chunk_key(array, c)) for c in coords))

    return [c for c, found in zip(coords, sync(present()), strict=True) if not found]


def part(chunk: Selection, region: Selection) -> Selection:
    """Where a chunk's overlap with `region` lies in array[region]."""
    return tuple(
        slice(max(c.start, r.start) - r.start, min(c.stop, r.stop) - r.start)
        for c, r in zip(chunk, region, strict=True)
    )


def all_fill(values: np.ndarray, array: zarr.Array) -> bool:
    """Whether every value equals the array's fill value (as a missing chunk reads)."""
    fill = array.fill_value
    if isinstance(fill, float) and np.isnan(fill):
        return bool(np.isnan(values).all())
    return bool((values == fill).all())


def stored_keys(group: zarr.Group) -> set[str]:
    """Every key of the store below the group (one listing)."""
    root = group.store_path

    async def listing() -> set[str]:
        return {key async for key in root.store.list_prefix(f"{root.path}/" if root.path else "")}

    return sync(listing())


def absent_chunks(array: zarr.Array, keys: set[str]) -> tuple[list[tuple[int, ...]], int]:
    """The first NAMED_CHUNKS chunks of the array missing from `keys` (a `stored_keys` listing), and how
    many are missing."""
    prefix = f"{array.store_path.path}/"
    present = sum(1 for key in keys if key.startswith(prefix) and not key.endswith("zarr.json"))
    missing = int(array.nchunks) - present if array.size else 0
    if missing <= 0:
        return [], 0
    first = []
    for coords, _ in chunk_regions(array, full_region(array)):
        if chunk_key(array, coords) not in keys:
            first.append(coords)
            if len(first) == NAMED_CHUNKS:
                break
    return first, missing


def stored_chunk_rows(array: zarr.Array, keys: set[str]) -> np.ndarray | None:
    """Sorted indices, along the first axis, of the chunk rows holding at least one chunk file in `keys` (a
    `stored_keys` listing); None for chunk keys not in zarr's default encoding (gtool writes that one)."""
    metadata = array.metadata
    if array.ndim == 0 or not isinstance(metadata, ArrayV3Metadata):
        return None
    encoding = metadata.chunk_key_encoding
    if not isinstance(encoding, DefaultChunkKeyEncoding):
        return None
    start, separator = f"{array.store_path.path}/c{encoding.separator}", encoding.separator
    rows = {int(key[len(start) :].split(separator, 1)[0]) for key in keys if key.startswith(start)}
    return np.array(sorted(rows), dtype=np.int64)


def missing_chunks_text(array: zarr.Array, absent: list[tuple[int, ...]], total: int | None = None) -> str:
    """'array P, chunk 3: missing ...' naming up to NAMED_CHUNKS of the absent chunks."""
    names = ", ".join(chunk_name(c) for c in absent[:NAMED_CHUNKS])
    count = total if total is not None else len(absent)
    if count > NAMED_CHUNKS:
        names += f" and {count - NAMED_CHUNKS:,} more"
    return (
        f"array {array.path}, {names}: missing (no chunk file; the store's writer stored every chunk, "
        "so the store is damaged or was copied incompletely)"
    )


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
    """(chunk coordinates, the chunk's whole region) of every chunk that `region` overlaps, lazily (the
    first axis is never materialized: metadata may claim billions of chunks)."""
    spans = [range(r.start // c, -(-r.stop // c)) for r, c in zip(region, array.chunks, strict=True)]
    rows, others = (spans[0], spans[1:]) if spans else (range(1), [])
    for coords in ((k, *rest)[: len(spans)] for k in rows for rest in itertools.product(*others)):
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
