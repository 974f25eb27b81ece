"""OGB edge lists as chunks of a 2 x E array: `edge_index` of raw/data.npz, or raw/edge.csv.gz converted."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk
from gtool.preprocess.sources.ogb.mappable import materialize


def locate_edge(first: int, from_csv: bool, k: int) -> tuple[int | None, str | None]:
    """Where edge `first + k` is: a line of edge.csv.gz, or a column of edge_index."""
    return (first + k + 1, None) if from_csv else (None, f"edge_index[:, {first + k}]")


@dataclass(frozen=True)
class EdgeArrayChunk(EdgeChunk):
    """Edges [first, last) of a 2 x E integer array; errors name `where` (the user's file)."""

    array: ArrayRef
    first: int
    last: int
    where: str
    from_csv: bool

    def read(self) -> EdgeBlock:
        edges = self.array.open()
        src = np.asarray(edges[0, self.first : self.last], dtype=np.int64)
        dst = np.asarray(edges[1, self.first : self.last], dtype=np.int64)
        return EdgeBlock(src, dst, where=self.where, locate=partial(locate_edge, self.first, self.from_csv))


def check_edge_index(array: ArrayRef, num_edges: int) -> None:
    """edge_index must be a 2 x num_edges integer array."""
    shape, dtype = array.header()
    if len(shape) != 2 or shape[0] != 2 or dtype.kind not in "iu":
        raise InputError(array.where, f"expected a 2 x E integer array, got shape {shape}, dtype {dtype}")
    if shape[1] != num_edges:
        raise InputError(array.where, f"{shape[1]} edges, but num_edges_list declares {num_edges}")


class OgbEdges:
    """The edge list of an OGB dataset: `prepare` makes it memory-mappable, `chunks` cuts it."""

    def __init__(self, path: str, num_edges: int):
        self.where = path
        self.num_edges = num_edges
        self.from_csv = not path.endswith(".npz")
        self.array: ArrayRef | None = None
        self.ready = False
        if not self.from_csv:
            self.array = ArrayRef(path, "edge_index")
            check_edge_index(self.array, num_edges)
            self.ready = not self.array.needs_extraction

    def prepare(self, workdir: str) -> None:
        """Convert edge.csv.gz to a .npy, or extract a deflated edge_index, into workdir."""
        if self.ready:
            return
        expected = "edges that num-edge-list.csv.gz declares"
        shape = (self.num_edges, 2)
        self.array = materialize(self.array, self.where, workdir, shape, np.int64, expected, edges=True)
        self.ready = True

    def chunks(self, edges_per_chunk: int) -> list[EdgeArrayChunk]:
        """Chunks of at most `edges_per_chunk` edges (after prepare)."""
        if not self.ready or self.array is None:
            raise RuntimeError(f"{self.where}: call prepare(workdir) before edge_chunks")
        per = max(1, edges_per_chunk)
        return [
            EdgeArrayChunk(self.array, a, min(a + per, self.num_edges), self.where, self.from_csv)
            for a in range(0, self.num_edges, per)
        ]
