"""The interface every graph source implements.

A source describes a graph as independent edge chunks (each readable on any Dask worker) plus optional
node data. Chunks never hold more than a bounded number of edges; node data may be O(N) (labels,
splits) or out of core (features, read by row blocks).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtool.errors import InputError


@dataclass
class EdgeBlock:
    """Edges read from one chunk: src -> dst as int64, with a way to name where edge k came from."""

    src: np.ndarray
    dst: np.ndarray
    where: str
    locate: Callable[[int], tuple[int | None, str | None]] = field(default=lambda k: (None, f"edge {k}"))

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def error(self, k: int, problem: str) -> InputError:
        """An InputError naming the file and the line (or array index) of edge k."""
        line, index = self.locate(k)
        return InputError(self.where, problem, line=line, index=index)


class EdgeChunk(ABC):
    """A picklable description of one chunk of a source's edges."""

    @abstractmethod
    def read(self) -> EdgeBlock:
        """Read and parse the chunk (raising InputError on malformed input)."""


Locate = Callable[[tuple[int, ...]], tuple[int | None, str | None]]
"""Where an entry (by its position in a block) came from: (line, index) for an InputError."""


def refuse_non_finite(values: np.ndarray, where: str, locate: Locate) -> None:
    """Fail at the first feature value that is NaN or infinite as float32, naming where it came from.

    Every feature source checks what it reads with this, so no source stores a non-finite feature."""
    bad = ~np.isfinite(values.astype(np.float32, copy=False))
    if bad.any():
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        line, index = locate(position)
        problem = f"feature {values[position]} is not a finite float32"
        raise InputError(where, problem, line=line, index=index)


class FeatureSource(ABC):
    """Node features, read by rows so that they never need to fit in memory."""

    num_features: int
    where: str
    on_disk: bool = False
    """True when the rows are read from a file: the pipeline then permutes them by sequential passes
    (gtool.preprocess.nodes.feature_shuffle) rather than gathering each output chunk's rows at random
    positions."""

    @abstractmethod
    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """float32 features of the given original node ids (sorted ascending, unique)."""

    def read_block(self, start: int, stop: int) -> np.ndarray:
        """float32 features of the consecutive original node ids [start, stop)."""
        return self.read_rows(np.arange(start, stop, dtype=np.int64))

    @property
    @abstractmethod
    def num_rows(self) -> int:
        """Number of feature rows (must equal the node count)."""

    def prepare(self, workdir: str) -> None:  # noqa: B027 - optional hook, most sources need none
        """Make random row access possible (e.g. extract a deflated .npz member to workdir)."""


@dataclass
class NodeData:
    """Optional per-node data of a source (None: gtool generates it)."""

    features: FeatureSource | None = None
    labels: np.ndarray | None = None
    split: np.ndarray | None = None
    num_classes: int | None = None


class GraphSource(ABC):
    """A graph to shard: edge chunks, the node count if declared, node data, a description."""

    name: str
    directed: bool = False

    @abstractmethod
    def num_nodes(self) -> int | None:
        """The declared node count, or None when it is max id + 1 of the edges."""

    @abstractmethod
    def edge_chunks(self, edges_per_chunk: int) -> Sequence[EdgeChunk]:
        """The edge list cut into chunks of at most about `edges_per_chunk` edges."""

    def edge_count(self) -> int | None:
        """How many edges the source holds, where that is known without reading them (else None)."""
        return None

    def node_data(self) -> NodeData:
        """Features, labels, split and class count that come with the source."""
        return NodeData()

    def prepare(self, workdir: str) -> None:  # noqa: B027 - optional hook, most sources need none
        """Make chunks independently readable (e.g. extract deflated members into workdir)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What was read, for the store's `source` metadata (name, path, sizes, checksum)."""


def check_edge_ids(block: EdgeBlock, num_nodes: int | None) -> None:
    """Fail on negative ids or ids >= the declared node count, naming the first offending edge."""
    for name, ids in (("source", block.src), ("destination", block.dst)):
        if ids.size == 0 or (ids.min() >= 0 and (num_nodes is None or ids.max() < num_nodes)):
            continue
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            k = int(bad[0])
            raise block.error(k, f"negative {name} node id {int(ids[k])} (ids must be >= 0)")
        if num_nodes is not None:
            bad = np.flatnonzero(ids >= num_nodes)
            if bad.size:
                k = int(bad[0])
                raise block.error(
                    k,
                    f"{name} node id {int(ids[k])} is >= the declared node count {num_nodes} "
                    "(ids are 0-based)",
                )
