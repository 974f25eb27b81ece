"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from Kipf & Welling's `ind.NAME.*` files.

Node data comes from planetoid.load (Kipf's exact loading); features stay raw (the trainer row-normalizes
them). Edges are the adjacency lists of ind.NAME.graph, undirected, as stored (duplicates included).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from gtool.errors import InputError
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk, FeatureSource, GraphSource, NodeData
from gtool.preprocess.sources.fileinfo import CHECKSUM_KEY, file_checksum
from gtool.preprocess.sources.planetoid.download import PARTS
from gtool.preprocess.sources.planetoid.load import load_planetoid
from gtool.preprocess.sources.planetoid.pickles import load_restricted


def read_adjacency(path: str) -> dict[int, list[int]]:
    """ind.NAME.graph: a dict of adjacency lists {node: [neighbours]}, checked to hold integers only."""
    graph = load_restricted(path)
    if not isinstance(graph, dict):
        raise InputError(path, f"expected a dict of adjacency lists, got {type(graph).__name__}")
    for node, neighbours in graph.items():
        if not isinstance(node, int) or not isinstance(neighbours, list):
            expected = "expected an integer node with a list of neighbours"
            raise InputError(path, expected, index=f"graph[{node!r}]")
        if not all(isinstance(v, int) for v in neighbours):
            raise InputError(path, "expected integer neighbour ids", index=f"graph[{node}]")
    return graph


def locate_entry(offsets: np.ndarray, nodes: np.ndarray, k: int) -> tuple[int | None, str | None]:
    """Edge k of a chunk is entry k - offsets[i] of graph[nodes[i]]."""
    i = int(np.searchsorted(offsets, k, side="right")) - 1
    return None, f"graph[{int(nodes[i])}][{k - int(offsets[i])}]"


@dataclass(frozen=True)
class AdjacencyChunk(EdgeChunk):
    """The adjacency lists of the nodes at positions [first, last) of ind.NAME.graph."""

    path: str
    first: int
    last: int

    def read(self) -> EdgeBlock:
        graph = read_adjacency(self.path)
        nodes = list(graph)[self.first : self.last]
        lengths = np.array([len(graph[node]) for node in nodes], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        node_ids = np.array(nodes, dtype=np.int64)
        src = np.repeat(node_ids, lengths)
        dst = np.array([v for node in nodes for v in graph[node]], dtype=np.int64)
        return EdgeBlock(src, dst, where=self.path, locate=partial(locate_entry, offsets, node_ids))


class SparseFeatures(FeatureSource):
    """Raw (unnormalized) features held in memory as a CSR matrix."""

    def __init__(self, matrix: sp.csr_matrix, where: str):
        self.matrix = matrix
        self.where = where
        self.num_features = int(matrix.shape[1])

    @property
    def num_rows(self) -> int:
        return int(self.matrix.shape[0])

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        return self.matrix[rows].toarray().astype(np.float32)


class PlanetoidSource(GraphSource):
    """A Planetoid dataset: undirected edges from the adjacency lists, features, labels, Kipf's split."""

    directed = False

    def __init__(self, folder: Path, name: str):
        self.folder, self.name = folder, name
        self.prefix = str(folder / f"ind.{name}")
        self.data = load_planetoid(self.prefix)
        self.lengths = np.array([len(v) for v in read_adjacency(f"{self.prefix}.graph").values()])

    def num_nodes(self) -> int:
        return int(self.data.features.shape[0])

    def edge_count(self) -> int:
        return int(self.lengths.sum())

    def edge_chunks(self, edges_per_chunk: int) -> list[AdjacencyChunk]:
        """Runs of whole adjacency lists of about `edges_per_chunk` entries."""
        path, nodes = f"{self.prefix}.graph", len(self.lengths)
        chunks, first, count = [], 0, 0
        for i, length in enumerate(self.lengths.tolist()):
            count += length
            if count >= edges_per_chunk or i == nodes - 1:
                chunks.append(AdjacencyChunk(path, first, i + 1))
                first, count = i + 1, 0
        return chunks

    def node_data(self) -> NodeData:
        features = SparseFeatures(self.data.features, f"{self.prefix}.allx, {self.prefix}.tx")
        return NodeData(features, self.data.labels, self.data.split, self.data.num_classes)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.folder.resolve()),
            "format": "planetoid",
            "num_nodes": self.num_nodes(),
            "adjacency_entries": int(self.lengths.sum()),
            "num_features": int(self.data.features.shape[1]),
            "num_classes": self.data.num_classes,
            CHECKSUM_KEY: {f"ind.{self.name}.{p}": file_checksum(f"{self.prefix}.{p}") for p in PARTS},
        }


def open_planetoid(path: str) -> PlanetoidSource:
    """The Planetoid dataset in folder `path` (its ind.NAME.x, y, tx, ty, allx, ally, graph, test.index)."""
    folder = Path(path)
    names = sorted({p.name.split(".")[1] for p in folder.glob("ind.*.graph")}) if folder.is_dir() else []
    if len(names) != 1:
        found = ", ".join(names) or "none"
        expected = "expected the files of one Planetoid dataset (ind.NAME.x, ..., ind.NAME.graph)"
        raise InputError(path, f"{expected}; found {found}")
    missing = [f"ind.{names[0]}.{p}" for p in PARTS if not (folder / f"ind.{names[0]}.{p}").is_file()]
    if missing:
        raise InputError(path, f"incomplete Planetoid dataset: missing {', '.join(missing)}")
    return PlanetoidSource(folder, names[0])
