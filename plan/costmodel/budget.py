"""A run's memory against a budget: what one node's ranks hold together, both feature modes of a
mini-batch run, the bytes a streamed run reads from the store, and the largest --batch-size that fits.

A mini-batch rank holds its adjacency shards without their transposes (a step multiplies by its cut
blocks), the sampler's node order and band node ids, and two steps' cut blocks (the current and the
prefetched one). With its feature block in memory a step gathers its members' rows from it, and its
evaluation runs the full-graph forward; streamed it holds steps' feature rows and evaluates in batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from gtool.architecture import ModelConfig
from gtool.geometry.bandnnz import GridShards
from gtool.geometry.bands import ceil_div
from gtool.geometry.layers import order_of_layer_output
from gtool.geometry.shapes import GCN_PARTS, LayerShape, StackParts
from gtool.memory import RANK_BASE_BYTES
from gtool.plan.costmodel.memory import (
    INDEX_BYTES,
    MemoryEstimate,
    adjacency_bytes,
    epoch_peak,
    estimate_memory,
    evaluation_peak,
    feature_bytes,
    feature_columns,
)
from gtool.plan.costmodel.minibatch import expected_shapes

STEPS_HELD = 2
"""Steps a rank holds at once: the current one and the next, prepared behind it."""
ROW_BLOCKS_HELD = 4
"""A streamed rank's blocks of a step's feature rows: the current step's, the next one's being read, and
the chunks zarr reads and decodes them from (1M nodes x 128 features, B = 131072: 1.70-1.75 GiB measured,
1.67 GiB priced)."""
ALLOCATOR_SLACK_BYTES = 512 << 20
"""Per rank: freed memory the allocator keeps (glibc's heaps of medium-size tensors and buffers). Measured
on 1M nodes x 128 features, B = 131072: RSS peaked 470 MiB lower with a fixed 128 KiB mmap threshold."""
CUT_ENTRY_BYTES = 2 * INDEX_BYTES + 4 + INDEX_BYTES + 4
"""A cut block's entry: as COO (int64 row and column, float32 value) and in its transpose (row, value)."""
BAND_ID_BYTES = 2 * INDEX_BYTES + 4
"""Per real row of a band the sampler finds members in: sorted node ids, positions, a column slot."""
ORDER_BYTES = INDEX_BYTES
"""Per node: the epoch's node order, drawn once per epoch."""
PERM_ID_BYTES = INDEX_BYTES
"""Per node id read from the store's permutation."""


class StoreReads(NamedTuple):
    """Bytes one rank reads from the store in a streamed run: per step and per epoch (its feature band's
    rows; a sampled evaluation reads them once more), and once at the start (the node ids of its bands)."""

    step_bytes: int
    epoch_bytes: int
    start_bytes: int


def node_peak(rank_peaks: np.ndarray, replicas: int, node_ranks: int) -> int:
    """The most memory one node's ranks hold together: launchers number a node's ranks consecutively,
    replica after replica, each rank holding RANK_BASE_BYTES before its data and ALLOCATOR_SLACK_BYTES
    beyond its tensors."""
    world = (
        np.tile(np.asarray(rank_peaks, dtype=np.int64), replicas) + RANK_BASE_BYTES + ALLOCATOR_SLACK_BYTES
    )
    nodes = ceil_div(world.size, node_ranks)
    padded = np.zeros(nodes * node_ranks, dtype=np.int64)
    padded[: world.size] = world
    return int(padded.reshape(nodes, node_ranks).sum(axis=1).max())


def _band_rows(shapes: list[LayerShape]) -> int:
    """Real rows of the distinct bands (by order and index) a rank's sampler finds members in."""
    bands = {}
    for s in shapes:
        g, order = s.geometry, order_of_layer_output(s.layer)
        bands[(order, g.rows.index, g.rows.size)] = g.rows.real
        bands[("c" if order == "r" else "r", g.inputs.index, g.inputs.size)] = g.inputs.real
    return sum(bands.values())


def _step_entries(shards: GridShards, num_nodes: int, batch_size: int) -> np.ndarray:
    """Each rank's expected cut entries of a step over its distinct shards: (B/N)^2 of their nonzeros."""
    fraction = (batch_size / num_nodes) ** 2
    return np.ceil((shards.nnz * shards.first).sum(axis=1) * fraction).astype(np.int64)


def minibatch_memory(
    shapes: list[LayerShape],
    shards: GridShards,
    m: ModelConfig,
    classes: int,
    num_nodes: int,
    batch_size: int,
    streamed: bool,
    parts: StackParts = GCN_PARTS,
    full_evaluation: bool | None = None,
) -> MemoryEstimate:
    """Per-rank memory of a mini-batch run of `batch_size`, its features in memory or `streamed`;
    `full_evaluation`: whether it evaluates with the full-graph forward (None: when in memory, as
    --eval's default), else in sampled batches."""
    full = estimate_memory(shapes, shards, m, classes, parts)
    step = expected_shapes(shapes, num_nodes, batch_size)
    cols = feature_columns(shapes, parts)
    sampling = ORDER_BYTES * num_nodes + BAND_ID_BYTES * _band_rows(shapes)
    cuts = STEPS_HELD * CUT_ENTRY_BYTES * _step_entries(shards, num_nodes, batch_size)
    activations = epoch_peak(step, m, classes, parts)
    if streamed:
        features = ROW_BLOCKS_HELD * feature_bytes(step[0].inputs, cols, m)
    else:
        features = full.features
        activations += step[0].inputs * cols * m.itemsize  # a step's member rows, gathered from the block
    if not streamed if full_evaluation is None else full_evaluation:
        activations = max(activations, evaluation_peak(shapes, m, parts))
    return replace(
        full,
        adjacency=adjacency_bytes(shards, m, transposes=False),
        features=features,
        activations=activations,
        sampling=sampling + int(cuts.max()),
    )


def store_reads(shapes: list[LayerShape], num_nodes: int, batch_size: int, parts: StackParts) -> StoreReads:
    """What a streamed rank reads (its largest band's): a step's member rows of its feature band, every row
    of it once an epoch, and at the start its bands' node ids."""
    first = shapes[0]
    row = feature_columns(shapes, parts) * 4
    members = ceil_div(first.geometry.inputs.real * batch_size, num_nodes)
    return StoreReads(members * row, first.geometry.inputs.real * row, PERM_ID_BYTES * _band_rows(shapes))


@dataclass(frozen=True)
class RunMemory:
    """A layout's memory in each feature mode it may run in ("memory"; mini-batch: "store" too), per rank
    and for one node's ranks together, the `mode` it runs in (the first that fits, else the smallest),
    whether that fits, and what a streamed run reads."""

    modes: dict[str, MemoryEstimate]
    node_peaks: dict[str, int]
    mode: str
    fits: bool
    reads: StoreReads | None = None

    @property
    def memory(self) -> MemoryEstimate:
        return self.modes[self.mode]

    @property
    def node_peak(self) -> int:
        return self.node_peaks[self.mode]

    def summary(self) -> dict[str, Any]:
        return {
            "features_from": self.mode,
            "node_peak_memory_bytes": self.node_peak,
            "memory_modes": {
                mode: {
                    "peak_memory_bytes": int(e.peak.max()),
                    "node_peak_memory_bytes": self.node_peaks[mode],
                }
                for mode, e in self.modes.items()
            },
            "store_reads": None if self.reads is None else self.reads._asdict(),
        }


@dataclass(frozen=True)
class Budget:
    """What a layout must fit: bytes per rank, bytes per node (None: no limit), its replicas, the ranks
    one node runs, the feature modes allowed ("auto": either, in memory first) and how it evaluates
    (--eval: "full" needs the feature blocks in memory; "sampled"; None: full in memory, else sampled)."""

    per_rank: int | None
    per_node: int | None
    replicas: int
    node_ranks: int
    features_from: str = "auto"
    evaluation: str | None = None

    def fits(self, memory: MemoryEstimate, node_peak: int) -> bool:
        rank_ok = self.per_rank is None or int(memory.peak.max()) <= self.per_rank
        return rank_ok and (self.per_node is None or node_peak <= self.per_node)

    def allows(self, mode: str) -> bool:
        full = mode == "store" and self.evaluation == "full"  # a full-graph forward needs every row
        return self.features_from in ("auto", mode) and not full


def run_memory(
    shapes: list[LayerShape],
    shards: GridShards,
    m: ModelConfig,
    classes: int,
    num_nodes: int,
    batch_size: int | None,
    budget: Budget,
    parts: StackParts = GCN_PARTS,
) -> RunMemory:
    """The memory of a layout under `budget`: full-graph (`batch_size` None) in memory; mini-batch in
    memory when that fits (and is allowed), else streamed (not with learned features, which are
    parameters)."""
    if batch_size is None:
        modes = {"memory": estimate_memory(shapes, shards, m, classes, parts)}
    else:
        allowed = [mode for mode in ("memory", "store") if budget.allows(mode) and not m.learnable_features]
        allowed = allowed or ["memory"]  # learned features are parameters; --eval full reads every row
        full = None if budget.evaluation is None else budget.evaluation == "full"
        modes = {
            mode: minibatch_memory(
                shapes, shards, m, classes, num_nodes, batch_size, mode == "store", parts, full
            )
            for mode in allowed
        }
    peaks = {mode: node_peak(e.peak, budget.replicas, budget.node_ranks) for mode, e in modes.items()}
    fitting = [mode for mode, e in modes.items() if budget.fits(e, peaks[mode])]
    mode = fitting[0] if fitting else min(peaks, key=peaks.__getitem__)
    reads = store_reads(shapes, num_nodes, batch_size, parts) if "store" in modes and batch_size else None
    return RunMemory(modes, peaks, mode, bool(fitting), reads)


def largest_batch(fits: Callable[[int], bool], num_nodes: int) -> int | None:
    """The largest B in [2, N] with fits(B), by bisection (fits turns false as B grows); None if not 2."""
    if fits(num_nodes):
        return num_nodes
    if not fits(2):
        return None
    low, high = 2, num_nodes
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low
