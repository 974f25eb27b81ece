"""Reduce side of the shuffle: dedupe runs of partitions (counting row degrees), then write tiles."""

from __future__ import annotations

from dataclasses import dataclass

import asyncio

import numpy as np
from zarr.api import asynchronous as zarr_async
from zarr.core.sync import sync

from gtool import layout
from gtool.preprocess import spill
from gtool.preprocess.partitions import PartitionPlan


@dataclass(frozen=True)
class SpillSlice:
    """Entries [start, stop) of one map output file."""

    path: str
    start: int
    stop: int


@dataclass(frozen=True)
class DedupeTask:
    """Partitions [first, last) of tile (i, j) of a matrix: gather, sort, drop duplicates."""

    matrix: int
    i: int
    j: int
    first: int
    last: int
    slices: tuple[SpillSlice, ...]
    out: str
    count_rows: bool


@dataclass
class DedupeResult:
    """A deduplicated run: where it is, its size and (for A0) nonzeros per row of its slab range."""

    task: DedupeTask
    nnz: int
    row_start: int
    row_counts: np.ndarray | None


def sorted_unique(parts: list[np.ndarray]) -> np.ndarray:
    """Sorted distinct keys of several arrays, sorting in place to keep one copy in memory."""
    if not parts:
        return np.zeros(0, dtype=np.int64)
    keys = np.concatenate(parts)
    keys.sort()
    if keys.size > 1:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def dedupe(task: DedupeTask, plan: PartitionPlan) -> DedupeResult:
    """Run one dedupe task; A0 runs also count nonzeros per row (the degrees of A + I)."""
    keys = sorted_unique([spill.load(s.path)[s.start : s.stop] for s in task.slices if s.stop > s.start])
    spill.save_to(keys, task.out)
    row_start = plan.slab_row_start(task.first)
    counts = None
    if task.count_rows:
        row_stop = min(plan.slab_row_start(task.last - 1) + plan.slab_rows, plan.tile_rows(task.i))
        counts = np.bincount(keys // plan.tile_size - row_start, minlength=max(0, row_stop - row_start))
    return DedupeResult(task=task, nnz=int(keys.size), row_start=row_start, row_counts=counts)


@dataclass(frozen=True)
class TileWrite:
    """Write tile (i, j) of a matrix from its deduplicated runs, in row order."""

    matrix: int
    i: int
    j: int
    runs: tuple[str, ...]
    nnz: int
    store: str
    row_scale: str | None
    col_scale: str | None


async def _write_fields(store: str, paths: dict[str, str], region: slice, data: dict[str, np.ndarray]) -> None:
    arrays = await asyncio.gather(*[zarr_async.open_array(store=store, path=paths[f], mode="r+") for f in data])
    await asyncio.gather(*[a.setitem(region, data[f]) for a, f in zip(arrays, data)])


def write_tile(task: TileWrite, plan: PartitionPlan) -> int:
    """Turn keys into (row, col, weight) and fill the tile's (already created) arrays; returns bytes written."""
    paths = {f: layout.tile_array(task.matrix, task.i, task.j, f) for f in layout.TILE_FIELDS}
    row_scale = spill.load(task.row_scale) if task.row_scale else None
    col_scale = spill.load(task.col_scale) if task.col_scale else None
    s = plan.tile_size
    offset = 0
    for run in task.runs:
        keys = spill.load(run, mmap=False)
        if keys.size == 0:
            continue
        rows, cols = np.divmod(keys, s)
        if row_scale is None or col_scale is None:
            vals = np.ones(keys.size, dtype=np.float32)
        else:
            vals = row_scale[task.i * s + rows] * col_scale[task.j * s + cols]
        data = {"row": rows.astype(np.int32), "col": cols.astype(np.int32), "val": vals.astype(np.float32)}
        sync(_write_fields(task.store, paths, slice(offset, offset + keys.size), data))
        offset += keys.size
    return task.nnz * 12
