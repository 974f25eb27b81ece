"""On-disk node features permuted by sequential passes: X'[i] = X[pc[i]] without reading at random.

Route: each task reads a block of consecutive input rows in one sequential read and spills them sorted by
output position, so that the rows bound for each bucket (a run of whole output chunks) are one contiguous
slice of the block's file. Assemble: each task reads its slice of every block's file, places the rows and
writes its bucket's chunks. The features are read twice and written twice (input, spill, spill, store),
all in pieces of many MB, whatever the page cache can hold; tasks hold a budgeted piece at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from zarr.core.metadata import ArrayV3Metadata

from gtool.preprocess import spill
from gtool.preprocess.sources.base import FeatureSource
from gtool.store import layout
from gtool.store.writing.chunk_writer import ChunkSink, write_chunk

INDEX_BYTES_PER_ROW = 24
"""What a task holds per row beside the features: positions, the sorting order, targets (8 bytes each)."""


@dataclass(frozen=True)
class FeatureShuffle:
    """What every route and assemble task of one run shares."""

    num_nodes: int
    block_rows: int
    bucket_rows: int
    positions: str
    pc: str
    spill_root: str
    store: str
    metadata: ArrayV3Metadata

    @property
    def blocks(self) -> int:
        """Route tasks: blocks of `block_rows` consecutive input rows."""
        return -(-self.num_nodes // self.block_rows)

    @property
    def buckets(self) -> int:
        """Assemble tasks: runs of `bucket_rows` output rows (whole chunks)."""
        return -(-self.num_nodes // self.bucket_rows)

    def block_file(self, index: int) -> str:
        return f"{self.spill_root}/features/b{index}.npy"


def plan_shuffle(
    store: str, metadata: ArrayV3Metadata, positions: str, pc: str, spill_root: str, piece_bytes: int
) -> FeatureShuffle:
    """Blocks and buckets of about `piece_bytes` each, features and index arrays (buckets rounded to whole
    chunks).

    `positions` (original node -> output position) and `pc` (output position -> original node) are
    spilled permutations."""
    num_nodes, num_features = metadata.shape
    chunk_rows = metadata.chunks[0]
    rows = max(1, piece_bytes // (4 * max(1, num_features) + INDEX_BYTES_PER_ROW))
    bucket_rows = max(1, rows // chunk_rows) * chunk_rows
    return FeatureShuffle(num_nodes, rows, bucket_rows, positions, pc, spill_root, store, metadata)


@dataclass(frozen=True)
class RoutedBlock:
    """A spilled block: how many of its rows each bucket takes, in bucket order."""

    index: int
    counts: np.ndarray


def route_block(index: int, shuffle: FeatureShuffle, features: FeatureSource) -> RoutedBlock:
    """Read input rows of block `index` sequentially and spill them in output order."""
    start = index * shuffle.block_rows
    stop = min(start + shuffle.block_rows, shuffle.num_nodes)
    rows = features.read_block(start, stop)
    positions = np.asarray(spill.load(shuffle.positions)[start:stop])
    spill.save_rows_in_order(rows, np.argsort(positions, kind="stable"), shuffle.block_file(index))
    counts = np.bincount(positions // shuffle.bucket_rows, minlength=shuffle.buckets)
    return RoutedBlock(index, counts)


def assemble_bucket(index: int, shuffle: FeatureShuffle, routed: list[RoutedBlock]) -> int:
    """Read bucket `index`'s slice of every spilled block, place the rows and write the bucket's chunks;
    returns the bytes of features written."""
    start = index * shuffle.bucket_rows
    stop = min(start + shuffle.bucket_rows, shuffle.num_nodes)
    source_blocks = np.asarray(spill.load(shuffle.pc)[start:stop]) // shuffle.block_rows
    targets = np.argsort(source_blocks, kind="stable")
    out = np.empty((stop - start, shuffle.metadata.shape[1]), dtype=np.float32)
    counts = np.stack([block.counts for block in sorted(routed, key=lambda b: b.index)])
    firsts = counts[:, :index].sum(axis=1)
    buffer = np.empty((int(counts[:, index].max(initial=0)), out.shape[1]), dtype=np.float32)
    placed = 0
    for block, (first, count) in enumerate(zip(firsts.tolist(), counts[:, index].tolist(), strict=True)):
        if count:
            rows = spill.read_rows_into(shuffle.block_file(block), first, first + count, buffer)
            out[targets[placed : placed + count]] = rows
            placed += count
    if placed != stop - start:
        raise RuntimeError(f"feature bucket {index}: {placed} rows routed to it, expected {stop - start}")
    chunk_rows = shuffle.metadata.chunks[0]
    sink = ChunkSink(shuffle.store)
    for offset in range(0, stop - start, chunk_rows):
        chunk = (start + offset) // chunk_rows
        write_chunk(sink, layout.FEATURES, shuffle.metadata, chunk, out[offset : offset + chunk_rows])
    return out.nbytes
