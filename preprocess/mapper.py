"""Map side of the shuffle: one edge chunk -> entries of A0 (and A1) bucketed by partition, spilled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gtool.preprocess import spill
from gtool.preprocess.partitions import PartitionPlan
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk, check_edge_ids


@dataclass(frozen=True)
class SelfLoops(EdgeChunk):
    """The self-loops of nodes [start, stop): every node gets exactly one."""

    start: int
    stop: int

    def read(self) -> EdgeBlock:
        ids = np.arange(self.start, self.stop, dtype=np.int64)
        return EdgeBlock(ids, ids, where=f"self-loops {self.start}-{self.stop}")


@dataclass(frozen=True)
class SpilledChunk(EdgeChunk):
    """A chunk already parsed once (while counting nodes), re-read from the spill directory."""

    src: str
    dst: str
    where: str

    def read(self) -> EdgeBlock:
        return EdgeBlock(spill.load(self.src, mmap=False), spill.load(self.dst, mmap=False), where=self.where)


@dataclass(frozen=True)
class MatrixMap:
    """Where matrix `matrix` puts an edge (row, col): positions row_inverse[row], col_inverse[col]."""

    matrix: int
    row_inverse: str
    col_inverse: str


@dataclass(frozen=True)
class MapJob:
    """What every map task shares."""

    plan: PartitionPlan
    matrices: tuple[MatrixMap, ...]
    directed: bool
    spill_root: str


def map_output(spill_root: str, matrix: int, index: int) -> str:
    """The file of matrix `matrix`'s entries of chunk `index`, sorted by partition."""
    return f"{spill_root}/map/m{matrix}/c{index}.npy"


@dataclass(frozen=True)
class MapOutputs:
    """A matrix's map outputs, as a dedupe task finds the entries of its partitions in them: one file per
    chunk (map_output) and `offsets`, a spilled int64 table [chunks, partitions + 1] of where each
    partition starts in each file. A task carries this, not a slice per chunk, so that what the `gtool`
    process plans and sends does not grow with tiles x chunks."""

    spill_root: str
    matrix: int
    offsets: str

    def slices(self, first: int, last: int) -> list[tuple[str, int, int]]:
        """(file, start, stop) of partitions [first, last) in every chunk's file that has entries there."""
        table = spill.load(self.offsets)
        starts, stops = table[:, first], table[:, last]
        return [
            (map_output(self.spill_root, self.matrix, int(k)), int(starts[k]), int(stops[k]))
            for k in np.flatnonzero(stops > starts)
        ]


@dataclass
class MapResult:
    """What one map task spilled: per matrix, the entry count of every partition (its file is
    map_output(spill_root, matrix, index))."""

    index: int
    edges: int
    counts: dict[int, np.ndarray]


def map_chunk(item: tuple[int, EdgeChunk], job: MapJob) -> MapResult:
    """Read chunk `index`, validate ids, orient it, and spill each matrix's entries sorted by partition.

    Entries (row, col) of a chunk without self-loops: both directions when symmetrizing, (dst, src) when
    directed (row = the node that aggregates its incoming edges); a SelfLoops chunk keeps its (v, v)."""
    from gtool.preprocess.compiled.shuffle import bucket_entries

    index, chunk = item
    block = chunk.read()
    check_edge_ids(block, job.plan.num_nodes)
    loops = isinstance(chunk, SelfLoops)
    rows, cols = (block.src, block.dst) if loops or not job.directed else (block.dst, block.src)
    mirror = not (loops or job.directed)
    counts = {}
    for m in job.matrices:
        row_inverse, col_inverse = spill.load(m.row_inverse), spill.load(m.col_inverse)
        keys, counts[m.matrix] = bucket_entries(rows, cols, row_inverse, col_inverse, job.plan, mirror, loops)
        spill.save_to(keys, map_output(job.spill_root, m.matrix, index))
    edges = 0 if loops else len(block)
    return MapResult(index=index, edges=edges, counts=counts)


@dataclass
class ScanResult:
    """A chunk parsed while counting nodes: its spilled arrays and largest id."""

    index: int
    chunk: SpilledChunk
    max_id: int


def scan_chunk(item: tuple[int, EdgeChunk], spill_root: str) -> ScanResult:
    """Parse a chunk of a source without a declared node count: check ids, spill them, find the max."""
    index, chunk = item
    block = chunk.read()
    check_edge_ids(block, None)
    src_path, dst_path = f"{spill_root}/scan/s{index}.npy", f"{spill_root}/scan/d{index}.npy"
    spill.save_to(block.src.astype(np.int64, copy=False), src_path)
    spill.save_to(block.dst.astype(np.int64, copy=False), dst_path)
    top = int(max(block.src.max(initial=-1), block.dst.max(initial=-1)))
    return ScanResult(index, SpilledChunk(src_path, dst_path, block.where), top)
