"""Node features of an OGB dataset that has edge features and no node features (ogbn-proteins): each node's
features are the mean of the features of the edges incident to it, as OGB's own examples make them
(`adj_t.mean(dim=1)` over the graph with inverse edges added). An edge counts for both its ends, whatever
its direction; a node without edges gets zeros. Computed once, streaming the edges and their features,
into a .npy in the prepare workdir (the cache), named after the edge feature file and remade when it or
the edge list changes."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.base import check_edge_ids, refuse_non_finite
from gtool.preprocess.sources.cache.entries import work_copy
from gtool.preprocess.sources.fileinfo import file_checksum
from gtool.preprocess.sources.ogb.csvfiles import count_columns, iter_csv_blocks
from gtool.preprocess.sources.ogb.edges import EdgeArrayChunk, OgbEdges
from gtool.preprocess.sources.ogb.features import OgbFeatures

EDGE_MEANS_ORIGIN = "the mean of each node's edge features"
"""What the source metadata says the node features are."""
EDGE_BLOCK = 1 << 22
"""Edges (and their feature rows) summed at a time."""
EDGE_MEANS = "ogb edge means 1"
"""What computes the means, named in the copy's note: change it when the computation changes."""


class EdgeMeanFeatures(OgbFeatures):
    """N x F node features: the mean of the F features of each node's incident edges (`edge_feat` of
    data.npz, or raw/edge-feat.csv.gz), read by rows once `prepare` has computed them."""

    def __init__(self, edge_features: ArrayRef | str, edges: OgbEdges, num_rows: int, num_features: int):
        self.edge_features: ArrayRef | str = edge_features
        self.edges = edges
        where = edge_features if isinstance(edge_features, str) else edge_features.where
        super().__init__(f"{where} ({EDGE_MEANS_ORIGIN})", num_rows, num_features, None)
        self.source_file = where

    @classmethod
    def from_edge_npz(cls, path: str, edges: OgbEdges, num_rows: int) -> EdgeMeanFeatures:
        """`edge_feat` of an OGB binary data.npz: E x F numbers."""
        array = ArrayRef(path, "edge_feat")
        shape, dtype = array.header()
        if len(shape) != 2 or dtype.kind not in "iuf" or shape[0] != edges.num_edges:
            expected = f"{edges.num_edges} x F numbers (one row per edge)"
            raise InputError(array.where, f"expected {expected}, got shape {shape}, dtype {dtype}")
        return cls(array, edges, num_rows, shape[1])

    @classmethod
    def from_edge_csv(cls, path: str, edges: OgbEdges, num_rows: int) -> EdgeMeanFeatures:
        """An OGB edge-feat.csv.gz: one line of F comma-separated numbers per edge."""
        return cls(path, edges, num_rows, count_columns(path))

    def prepare(self, workdir: str) -> None:
        """Compute the means into workdir once (the edges must be prepared first; a deflated edge_feat is
        extracted there first)."""
        if self.ready:
            return
        if isinstance(self.edge_features, ArrayRef):
            self.edge_features = self.edge_features.prepared(workdir)
        edges = self.edges.array
        if edges is None or not self.edges.ready:
            raise RuntimeError(f"{self.edges.where}: prepare the edges before their features' means")
        source = self.edge_features if isinstance(self.edge_features, str) else self.edge_features.file
        made_by = f"{EDGE_MEANS} over {self.edges.where} {file_checksum(self.edges.where)}"
        size = 4 * self._num_rows * self.num_features

        def write(out: BinaryIO) -> None:
            np.lib.format.write_array(out, self.means(edges))

        copy = work_copy(workdir, source, ".node-means.npy", write, size, made_by)
        self.array = ArrayRef(copy, file=self.where)
        self.ready = True

    def means(self, edges: ArrayRef) -> np.ndarray:
        """float32 N x F: each node's incident edge features summed (float64) and divided by its edges."""
        n, width = self._num_rows, self.num_features
        sums = np.zeros((n, width), dtype=np.float64)
        counts = np.zeros(n, dtype=np.int64)
        for first, values in self.feature_blocks():
            last = first + values.shape[0]
            block = EdgeArrayChunk(edges, first, last, self.edges.where, self.edges.from_csv).read()
            check_edge_ids(block, n)
            refuse_non_finite(values, self.source_file, functools.partial(self.locate_edge, first))
            for ends in (block.src, block.dst):
                counts += np.bincount(ends, minlength=n)
                for column in range(width):
                    sums[:, column] += np.bincount(ends, weights=values[:, column], minlength=n)
        return (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)

    def feature_blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first edge, the rows of edge features from it on) in order; fails unless there is exactly one
        row per edge."""
        total, done = self.edges.num_edges, 0
        if isinstance(self.edge_features, str):
            for line, block in iter_csv_blocks(self.edge_features, self.num_features, integer=False):
                if done + block.shape[0] > total:
                    extra = line + total - done
                    raise InputError(self.edge_features, f"more lines than the {total} edges", line=extra)
                yield done, block
                done += block.shape[0]
            if done != total:
                raise InputError(self.edge_features, f"{done} lines, expected one per edge ({total})")
            return
        rows = self.edge_features.open()
        for first in range(0, total, EDGE_BLOCK):
            yield first, np.asarray(rows[first : first + EDGE_BLOCK], dtype=np.float64)

    def locate_edge(self, first: int, at: tuple[int, ...]) -> tuple[int | None, str | None]:
        """Where the feature of edge `first + at[0]`, column at[1], is in the edge feature file."""
        if isinstance(self.edge_features, str):
            return first + at[0] + 1, f"column {at[1] + 1}"
        return None, f"edge_feat[{first + at[0]}, {at[1]}]"
