"""Write node data in both permuted orders: features in pc order (out of core), labels and splits in both."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from zarr.core.metadata import ArrayV3Metadata

from gtool.preprocess import spill
from gtool.preprocess.engine.threaded import gathered
from gtool.preprocess.sources.base import FeatureSource
from gtool.store import layout
from gtool.store.values import permutations_digest
from gtool.store.writing.chunk_writer import ChunkSink, array_metadata, write_chunk
from gtool.store.writing.codecs import create_array

FEATURE_TASKS_PER_WORKER = 32
"""Feature chunks are grouped into about this many tasks per worker: a chunk takes tens of milliseconds,
and Dask costs this process a few milliseconds per task (at 256 one-chunk tasks, a fifth of a core
while the workers write features)."""


@dataclass(frozen=True)
class FeatureRows:
    """Rows [start, stop) of the permuted feature matrix, X'[i] = X[pc[i]]: whole chunks of the array,
    written one after the other."""

    start: int
    stop: int
    pc: str
    store: str
    metadata: ArrayV3Metadata


def create_features(store: str, num_nodes: int, num_features: int) -> ArrayV3Metadata:
    """Create nodes/features (chunks of whole rows, about layout.FEATURE_CHUNK_BYTES each); returns its
    metadata."""
    rows = max(1, min(layout.feature_chunk_rows(num_features), num_nodes))
    metadata = array_metadata("float32", (num_nodes, num_features), (rows, max(1, num_features)))
    ChunkSink(store).put_array(layout.FEATURES, metadata)
    return metadata


def feature_tasks(store: str, pc: str, metadata: ArrayV3Metadata, workers: int) -> list[FeatureRows]:
    """The write tasks of nodes/features: runs of whole chunks, about FEATURE_TASKS_PER_WORKER for each of
    `workers` workers (one chunk each when there are fewer chunks)."""
    num_nodes, rows = metadata.shape[0], metadata.chunks[0]
    chunks = -(-num_nodes // rows)
    step = rows * max(1, chunks // (FEATURE_TASKS_PER_WORKER * workers))
    return [FeatureRows(a, min(a + step, num_nodes), pc, store, metadata) for a in range(0, num_nodes, step)]


def write_feature_rows(task: FeatureRows, features: FeatureSource) -> int:
    """Gather the original rows of each permuted chunk of the task (in sorted order) and write them as
    that chunk, one chunk at a time."""
    rows, sink, written, pc = task.metadata.chunks[0], ChunkSink(task.store), 0, spill.load(task.pc)
    for start in range(task.start, task.stop, rows):
        ids = np.asarray(pc[start : min(start + rows, task.stop)])
        order = np.argsort(ids, kind="stable")
        block = np.empty((ids.size, features.num_features), dtype=np.float32)
        block[order] = features.read_rows(ids[order])
        write_chunk(sink, layout.FEATURES, task.metadata, start // rows, block)
        written += block.nbytes
    return written


def write_node_arrays(
    store: str, labels: np.ndarray, split: np.ndarray, pr: np.ndarray, pc: np.ndarray, threads: int = 1
) -> None:
    """Labels and splits in pr order (.../r) and pc order (.../c), gathered by up to `threads` threads."""
    for order, perm in (("r", pr), ("c", pc)):
        for name, values in ((layout.LABELS[order], labels), (layout.SPLIT[order], split)):
            create_array(store=store, name=name, data=gathered(values, perm, threads), chunks=_chunks(values))


def write_permutations(store: str, pr: np.ndarray, pc: np.ndarray) -> str:
    """perm/r and perm/c as int64; returns their digest (the store's node order, metadata
    permutation.digest)."""
    create_array(store=store, name=layout.PERM_ROWS, data=np.asarray(pr, np.int64), chunks=_chunks(pr))
    create_array(store=store, name=layout.PERM_COLS, data=np.asarray(pc, np.int64), chunks=_chunks(pc))
    return permutations_digest(pr, pc)


def _chunks(array: np.ndarray) -> tuple[int, ...]:
    return (max(1, min(array.shape[0], 1 << 20)),) + tuple(array.shape[1:])
