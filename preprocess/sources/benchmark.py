"""Graphs in the .npz layout of the GNN benchmark collections (Shchur et al., "Pitfalls of GNN
evaluation"), the files PyG's CitationFull, Amazon and Coauthor datasets download.

The adjacency is a CSR matrix (adj_data, adj_indices, adj_indptr, adj_shape) read out of core like a
scipy CSR file; features come from the CSR attribute matrix (attr_data, attr_indices, attr_indptr,
attr_shape) densified to float32 by row blocks, or a dense attr_matrix; labels from 'labels'. Values
are kept as stored (PyG also sets positive feature values to 1). Other arrays (class names, ...) are
not read. The files hold no split: gtool draws its seeded random one.
"""

from __future__ import annotations

from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.base import FeatureSource, NodeData
from gtool.preprocess.sources.nodes.files import FeatureArray, load_labels
from gtool.preprocess.sources.npzmember import npz_keys
from gtool.preprocess.sources.sparse.compressed import Compressed
from gtool.preprocess.sources.sparse.csrfeatures import CsrFeatures
from gtool.preprocess.sources.sparse.scipynpz import CompressedSource, square_size

BENCHMARK_KEYS = frozenset({"adj_indptr", "adj_indices", "adj_shape"})


def open_attributes(path: str, keys: list[str]) -> FeatureSource | None:
    """The sparse attribute matrix, else the dense attr_matrix, else None."""
    if "attr_indptr" in keys:
        return CsrFeatures(path, "attr_")
    if "attr_matrix" in keys:
        return FeatureArray(ArrayRef(path, "attr_matrix"))
    return None


class BenchmarkSource(CompressedSource):
    """A GNN-benchmark graph: adjacency, features and labels."""

    def __init__(self, path: str, num_nodes: int | None = None):
        size = square_size(path, "adj_shape")
        super().__init__(
            path, num_nodes, Compressed.open(path, "adj_", True, (size, size)), "gnn-benchmark", size
        )
        keys = npz_keys(path)
        self.features = open_attributes(path, keys)
        self.has_labels = "labels" in keys

    def prepare(self, workdir: str) -> None:
        super().prepare(workdir)
        if self.features is not None:
            self.features.prepare(workdir)

    def node_data(self) -> NodeData:
        labels, classes = load_labels(self.path, self.num_nodes()) if self.has_labels else (None, None)
        return NodeData(features=self.features, labels=labels, num_classes=classes)
