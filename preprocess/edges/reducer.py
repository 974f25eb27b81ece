"""Reduce side of the shuffle: dedupe runs of partitions (counting row degrees), then write tiles.

A symmetrized graph's A1 = Pc Â Pr^T is A0 transposed: its tiles are written from A0's deduplicated runs
(tile (i, j) of A1 from tile (j, i) of A0) instead of shuffling and deduplicating the same edges again.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

import numpy as np

from gtool.preprocess import spill
from gtool.preprocess.edges.mapper import MapOutputs
from gtool.preprocess.edges.tile_arrays import tile_metadata
from gtool.preprocess.partitions import PartitionPlan
from gtool.store import layout
from gtool.store.writing.chunk_writer import AppendWriter, ChunkSink


@dataclass(frozen=True)
class DedupeTask:
    """Partitions [first, last) of tile (i, j) of a matrix: gather, sort, drop duplicates."""

    i: int
    j: int
    first: int
    last: int
    inputs: MapOutputs
    out: str
    count_rows: bool
    count_column_slabs: bool = False

    @property
    def matrix(self) -> int:
        """The matrix (0 for A0, 1 for A1) whose map outputs the task reads."""
        return self.inputs.matrix


@dataclass
class DedupeResult:
    """A deduplicated run: where it is, its size and, when A1 is written as A0 transposed, nonzeros per
    column slab (the row slabs of the transposed tile)."""

    task: DedupeTask
    nnz: int
    column_slab_counts: np.ndarray | None = None

    @property
    def slab_counts(self) -> np.ndarray:
        """column_slab_counts, which only a run of a task with count_column_slabs has."""
        if self.column_slab_counts is None:
            raise RuntimeError(f"run of tile {self.task.i, self.task.j} has no column slab counts")
        return self.column_slab_counts


def batches(items: list, sizes: list[int], cap: int) -> list[list]:
    """Consecutive items grouped so each group holds at most `cap` entries (an item alone may exceed it)."""
    groups: list[list] = [[]]
    total = 0
    for item, size in zip(items, sizes, strict=True):
        if groups[-1] and total + size > cap:
            groups.append([])
            total = 0
        groups[-1].append(item)
        total += size
    return [g for g in groups if g]


@dataclass(frozen=True)
class RowCounts:
    """Nonzeros per row of rows [start, start + its size) of a tile row, summed over the A0 runs of one
    batch, in a spill file (int64: a file, not a message, so no worker sends the parent O(N) bytes)."""

    start: int
    path: str


@dataclass
class DedupedBatch:
    """The runs of a batch of dedupe tasks and, per tile row its A0 runs are in, their row counts."""

    runs: list[DedupeResult]
    row_counts: dict[int, RowCounts]


def dedupe_batch(tasks: list[DedupeTask], plan: PartitionPlan) -> DedupedBatch:
    """Several small dedupe tasks in one Dask task, one after the other. The row counts of a tile row's A0
    runs, which are consecutive tasks, are summed as they come and spilled once per tile row."""
    runs, row_counts = [], {}
    for (i, counted), group in groupby(tasks, key=lambda t: (t.i, t.count_rows)):
        total, start, path = np.zeros(0, dtype=np.int64), 0, ""
        for task in group:
            run, counts, row_start = dedupe(task, plan)
            runs.append(run)
            if counts is not None:
                total, start = added(total, start, counts, row_start)
                path = f"{task.out.removesuffix('.npy')}.rows.npy"
        if counted:
            spill.save_to(total, path)
            row_counts[i] = RowCounts(start, path)
    return DedupedBatch(runs, row_counts)


def added(total: np.ndarray, start: int, counts: np.ndarray, at: int) -> tuple[np.ndarray, int]:
    """Counts of rows [start, start + total.size) plus counts of rows [at, at + counts.size), as (counts,
    first row) over the union of both ranges."""
    if total.size == 0:
        return counts.astype(np.int64), at
    first, end = min(start, at), max(start + total.size, at + counts.size)
    if (first, end) != (start, start + total.size):
        grown = np.zeros(end - first, dtype=np.int64)
        grown[start - first : start - first + total.size] = total
        total, start = grown, first
    total[at - start : at - start + counts.size] += counts
    return total, start


def dedupe(task: DedupeTask, plan: PartitionPlan) -> tuple[DedupeResult, np.ndarray | None, int]:
    """Run one dedupe task: its run, and for A0 its nonzeros per row (the degrees of A + I) from the row
    it returns on."""
    from gtool.preprocess.kernels.shuffle import unique_counted

    keys = task.inputs.entries(task.first, task.last)
    keys.sort()
    row_start = plan.slab_row_start(task.first)
    row_stop = min(plan.slab_row_start(task.last - 1) + plan.slab_rows, plan.tile_rows(task.i))
    num_rows = max(0, row_stop - row_start) if task.count_rows else 0
    keys, rows, slabs = unique_counted(keys, plan, row_start, num_rows, task.count_column_slabs)
    spill.save_to(keys, task.out)
    slab_counts = slabs if task.count_column_slabs else None
    return DedupeResult(task, int(keys.size), slab_counts), rows if task.count_rows else None, row_start


def tile_row_degrees(item: tuple[int, tuple[DedupedBatch, ...]], plan: PartitionPlan, out: str) -> str:
    """Sum the row counts of tile row i, one file from each batch that has A0 runs in it, into the degrees
    of its rows; returns the spill file of those degrees (int64). The row count files stay: should the
    worker that holds the result die before it is fetched, Dask runs the task again (the `gtool` process
    releases them after the stage)."""
    i, done = item
    degrees = np.zeros(plan.tile_rows(i), dtype=np.int64)
    for part in (batch.row_counts[i] for batch in done):
        counts = spill.load(part.path)
        degrees[part.start : part.start + counts.size] += counts
    path = f"{out}/{i}.npy"
    spill.save_to(degrees, path)
    return path


@dataclass(frozen=True)
class TileWrite:
    """Tile (i, j) of a matrix from deduplicated runs, weighted by row/column scales.

    Without `transposed_rows` the runs are this tile's own, in row order, one write round each. With
    them, the runs are those of the tile this one transposes, and round k writes this tile's rows
    [lo, hi) = transposed_rows[k], gathered from the columns [lo, hi) of every run.
    """

    matrix: int
    i: int
    j: int
    runs: tuple[str, ...]
    nnz: int
    row_scale: str | None
    col_scale: str | None
    transposed_rows: tuple[tuple[int, int], ...] = ()

    @property
    def rounds(self) -> int:
        return len(self.transposed_rows) if self.transposed_rows else len(self.runs)

    def entries(self, round_: int, tile_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Tile-local (row, col), int32 and sorted, of the entries written in one round."""
        from gtool.preprocess.kernels.tiles import split_keys, transpose_runs

        if not self.transposed_rows:
            return split_keys(spill.load(self.runs[round_]), tile_size)
        lo, hi = self.transposed_rows[round_]
        return transpose_runs([spill.load(run) for run in self.runs], lo, hi, tile_size)


def tile_entries(
    tile: TileWrite, round_: int, plan: PartitionPlan, scales: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """(row, col, val) of the entries one round writes (`scales`: the scale arrays, by spill path)."""
    from gtool.preprocess.kernels.tiles import weights

    rows, cols = tile.entries(round_, plan.tile_size)
    if tile.row_scale is None or tile.col_scale is None:
        vals = np.ones(rows.size, dtype=np.float32)
    else:
        s = plan.tile_size
        vals = weights(rows, cols, scales[tile.row_scale], scales[tile.col_scale], tile.i * s, tile.j * s)
    return {"row": rows, "col": cols, "val": vals}


def write_tiles(batch: tuple[str, list[TileWrite]], plan: PartitionPlan) -> int:
    """Write the arrays of a batch of tiles, one tile after the other; returns the bytes written."""
    store, tiles = batch
    sink = ChunkSink(store)
    scales = {path: spill.load(path) for t in tiles for path in (t.row_scale, t.col_scale) if path}
    for tile in tiles:
        write_tile(sink, tile, plan, scales)
    return layout.ENTRY_BYTES * sum(t.nnz for t in tiles)


def write_tile(sink: ChunkSink, tile: TileWrite, plan: PartitionPlan, scales: dict[str, np.ndarray]) -> None:
    """The group and row/col/val arrays of one tile, its rounds appended in order."""
    group = layout.tile_group(tile.matrix, tile.i, tile.j)
    fields = {
        f: AppendWriter(sink, f"{group}/{f}", tile_metadata(layout.TILE_DTYPES[f], tile.nnz))
        for f in layout.TILE_FIELDS
    }
    for round_ in range(tile.rounds):
        for f, values in tile_entries(tile, round_, plan, scales).items():
            fields[f].append(values)
    for writer in fields.values():
        writer.close()
    sink.put_group(group)
