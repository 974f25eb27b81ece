"""Map side of the shuffle: one edge chunk -> entries of A0 (and A1) bucketed by partition, spilled."""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
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


def draw_process_tag() -> str:
    """This process's id and a random tag: workers in containers of one host can share its host name (host
    networking) and have the same process and thread ids (each container numbers its own)."""
    return f"{os.getpid()}.{secrets.token_hex(4)}"


_process_tag = draw_process_tag()


def redraw_process_tag() -> None:
    """A forked worker draws its own tag."""
    global _process_tag
    _process_tag = draw_process_tag()


os.register_at_fork(after_in_child=redraw_process_tag)


def process_tag() -> str:
    """The tag of this process (draw_process_tag), drawn once per process."""
    return _process_tag


def dedupe_folder(spill_root: str, matrix: int) -> str:
    """The folder of matrix `matrix`'s dedupe stage: the tables of its map outputs and its sorted runs."""
    return f"{spill_root}/dedupe/m{matrix}"


def thread_file(spill_root: str, matrix: int) -> str:
    """The map file of matrix `matrix` that the calling thread appends its chunks' entries to: one per thread
    (named by host, process and thread), so that no two tasks write one file at once."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())
    return f"{spill_root}/map/m{matrix}/{host}-{process_tag()}-{threading.get_native_id()}.bin"


@dataclass(frozen=True)
class MapOutputs:
    """A matrix's map outputs, as a dedupe task finds the entries of its partitions in them.

    Each map task appends a chunk's entries, sorted by partition, to the file of its thread (thread_file),
    so there are as many files as threads that ran map tasks, whatever the size of the graph. `offsets`
    is a spilled int64 table [chunks, partitions + 1] of where each partition of each chunk starts in its
    file, `holders` a spilled int32 table [chunks] of which of `files` holds each chunk. A task carries
    these paths, not a slice per chunk, so that what the `gtool` process plans and sends does not grow with
    tiles x chunks."""

    matrix: int
    files: tuple[str, ...]
    offsets: str
    holders: str

    @classmethod
    def gathered(cls, results: list[MapResult], matrix: int, root: str) -> tuple[MapOutputs, np.ndarray]:
        """Matrix `matrix`'s outputs of the map tasks `results` (in chunk order), with their tables spilled
        under `root`, and the entry count of every partition. Takes the counts out of the results."""
        counts = np.stack([r.counts.pop(matrix) for r in results])
        files = sorted({r.placed[matrix][0] for r in results})
        number = {path: k for k, path in enumerate(files)}
        holders = np.array([number[r.placed[matrix][0]] for r in results], dtype=np.int32)
        offsets = np.empty((counts.shape[0], counts.shape[1] + 1), dtype=np.int64)
        offsets[:, 0] = [r.placed[matrix][1] for r in results]
        np.cumsum(counts, axis=1, out=offsets[:, 1:])
        offsets[:, 1:] += offsets[:, :1]
        tables = dedupe_folder(root, matrix)
        spill.save_to(offsets, f"{tables}/offsets.npy")
        spill.save_to(holders, f"{tables}/holders.npy")
        outputs = cls(matrix, tuple(files), f"{tables}/offsets.npy", f"{tables}/holders.npy")
        return outputs, counts.sum(axis=0, dtype=np.int64)

    def entries(self, first: int, last: int) -> np.ndarray:
        """The entries of partitions [first, last) of every chunk: one pass over each file, copying the
        chunks' ranges at once (gather_ranges)."""
        from gtool.preprocess.kernels.shuffle import gather_ranges

        table = spill.load(self.offsets)
        starts, stops = table[:, first], table[:, last]
        holders = spill.load(self.holders)
        out = np.empty(int((stops - starts).sum()), dtype=np.int64)
        filled = 0
        for index, path in enumerate(self.files):
            held = holders == index
            source = spill.load_raw(path, out.dtype)
            if np.any(stops[held] > source.size):
                raise ValueError(f"{path}: truncated, {source.size} entries where the map tasks wrote more")
            filled += gather_ranges(source, starts[held], stops[held], out[filled:])
        return out


@dataclass
class MapResult:
    """What one map task spilled: per matrix, the entry count of every partition and where the entries are
    (the file and the entry at which they start)."""

    index: int
    edges: int
    counts: dict[int, np.ndarray]
    placed: dict[int, tuple[str, int]]


def map_chunk(item: tuple[int, EdgeChunk], job: MapJob) -> MapResult:
    """Read chunk `index`, validate ids, orient it, and append each matrix's entries, sorted by partition, to
    the thread's map file of that matrix.

    Entries (row, col) of a chunk without self-loops: both directions when symmetrizing, (dst, src) when
    directed (row = the node that aggregates its incoming edges); a SelfLoops chunk keeps its (v, v)."""
    from gtool.preprocess.kernels.shuffle import bucket_entries

    index, chunk = item
    block = chunk.read()
    check_edge_ids(block, job.plan.num_nodes)
    loops = isinstance(chunk, SelfLoops)
    rows, cols = (block.src, block.dst) if loops or not job.directed else (block.dst, block.src)
    mirror = not (loops or job.directed)
    counts, placed = {}, {}
    for m in job.matrices:
        row_inverse, col_inverse = spill.load(m.row_inverse), spill.load(m.col_inverse)
        keys, counts[m.matrix] = bucket_entries(rows, cols, row_inverse, col_inverse, job.plan, mirror, loops)
        path = thread_file(job.spill_root, m.matrix)
        placed[m.matrix] = (path, spill.append_to(keys, path))
    edges = 0 if loops else len(block)
    return MapResult(index=index, edges=edges, counts=counts, placed=placed)


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
