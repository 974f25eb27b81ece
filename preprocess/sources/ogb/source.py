"""OGB node-property datasets (ogbn-arxiv, ogbn-products, ogbn-papers100M, ogbn-proteins) as a graph source.

Read in OGB's own on-disk layout (see ogb.layout), in either raw form: the CSV form's edges and features
are converted once to .npy files in the prepare workdir; the binary form's big arrays are memory-mapped
straight out of raw/data.npz, or extracted from it first when deflated. Nothing is loaded whole. A
dataset with edge features and no node features gets the mean of each node's edge features
(ogb.edge_means); one of K binary tasks (ogbn-proteins) gets N x K multi-label labels.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, prepare_arrays
from gtool.preprocess.sources.base import GraphSource, NodeData
from gtool.preprocess.sources.dataroot import default_root
from gtool.preprocess.sources.fileinfo import CHECKSUM_KEY, file_checksum
from gtool.preprocess.sources.npzmember import npz_keys
from gtool.preprocess.sources.ogb.edge_means import EDGE_MEANS_ORIGIN, EdgeMeanFeatures
from gtool.preprocess.sources.ogb.edges import EdgeArrayChunk, OgbEdges
from gtool.preprocess.sources.ogb.features import OgbFeatures
from gtool.preprocess.sources.ogb.fetch import fetch
from gtool.preprocess.sources.ogb.layout import (
    OgbLayout,
    dataset_names,
    known_dataset,
    layout_of_directory,
)
from gtool.preprocess.sources.ogb.nodes import read_counts, read_labels, read_split, read_task_labels


class OgbSource(GraphSource):
    """An OGB node-property dataset: edges, node count, features, labels, official split."""

    def __init__(self, dataset: OgbLayout):
        self.dataset = dataset
        self.name = dataset.info.name
        self.directed = dataset.info.directed
        self._num_nodes, self._num_edges = read_counts(dataset.raw, dataset.info.binary)
        edges = "data.npz" if dataset.info.binary else "edge.csv.gz"
        self.edges = OgbEdges(str(dataset.raw / edges), self._num_edges)
        self.features: OgbFeatures | None = self.open_features() or self.edge_means()
        name = "node-label.npz" if dataset.info.binary else "node-label.csv.gz"
        self.label_file = str(dataset.raw / name) if (dataset.raw / name).is_file() else None
        binary_labels = self.label_file if dataset.info.binary else None
        self.label_array = ArrayRef(binary_labels, "node_label") if binary_labels else None

    def open_features(self) -> OgbFeatures | None:
        """node_feat of data.npz or node-feat.csv.gz, if the dataset has features."""
        raw = self.dataset.raw
        if self.dataset.info.binary:
            data = str(raw / "data.npz")
            return OgbFeatures.from_npz(data, self._num_nodes) if "node_feat" in npz_keys(data) else None
        csv = raw / "node-feat.csv.gz"
        return OgbFeatures.from_csv(str(csv), self._num_nodes) if csv.is_file() else None

    def edge_means(self) -> EdgeMeanFeatures | None:
        """The mean of each node's edge features (edge_feat of data.npz, or edge-feat.csv.gz), if the
        dataset has edge features."""
        raw, n = self.dataset.raw, self._num_nodes
        if self.dataset.info.binary:
            data = str(raw / "data.npz")
            has = "edge_feat" in npz_keys(data)
            return EdgeMeanFeatures.from_edge_npz(data, self.edges, n) if has else None
        csv = raw / "edge-feat.csv.gz"
        return EdgeMeanFeatures.from_edge_csv(str(csv), self.edges, n) if csv.is_file() else None

    def num_nodes(self) -> int:
        return self._num_nodes

    def prepare(self, workdir: str) -> None:
        """Make edges, features and labels memory-mappable: deflated members extracted side by side (kept
        in workdir, the cache, for later runs), the CSV form converted."""
        parts = [self.edges] + ([self.features] if self.features is not None else [])
        packed = [(part, part.array) for part in parts if part.array is not None and not part.ready]
        labels = [self.label_array] if self.label_array is not None else []
        prepared = prepare_arrays([array for _, array in packed] + labels, workdir)
        for (part, _), array in zip(packed, prepared, strict=False):
            part.array, part.ready = array, True
        if labels:
            self.label_array = prepared[-1]
        for part in parts:
            part.prepare(workdir)

    def edge_chunks(self, edges_per_chunk: int) -> list[EdgeArrayChunk]:
        return self.edges.chunks(edges_per_chunk)

    @functools.cached_property
    def labels(self) -> np.ndarray | None:
        """Class ids per node (-1: unlabelled), or N x K binary task labels (-1: unknown), read once."""
        if self.label_file is None:
            return None
        if self.dataset.info.num_tasks > 1:
            return read_task_labels(
                self.label_array or self.label_file, self._num_nodes, self.dataset.info.num_tasks
            )
        return read_labels(
            self.label_array or self.label_file, self._num_nodes, self.dataset.info.num_classes
        )

    @functools.cached_property
    def split(self) -> np.ndarray | None:
        """OGB's official split as int8 codes, read once."""
        split_dir = self.dataset.split_dir
        return read_split(split_dir, self._num_nodes) if split_dir is not None else None

    def node_data(self) -> NodeData:
        classes = self.dataset.info.num_classes
        return NodeData(features=self.features, labels=self.labels, split=self.split, num_classes=classes)

    def describe(self) -> dict[str, Any]:
        files, tasks = self.dataset.files(), self.dataset.info.num_tasks
        return {
            "name": self.name,
            "path": str(self.dataset.directory.resolve()),
            "format": "ogb-npz" if self.dataset.info.binary else "ogb-csv",
            "num_nodes": self._num_nodes,
            "num_edges": self._num_edges,
            "directed": self.directed,
            "split": self.dataset.info.split,
            "num_classes": self.dataset.info.num_classes,
            **({"num_tasks": tasks} if tasks > 1 else {}),
            **({"node_features": EDGE_MEANS_ORIGIN} if isinstance(self.features, EdgeMeanFeatures) else {}),
            "size_bytes": sum(p.stat().st_size for p in files),
            CHECKSUM_KEY: {str(p.relative_to(self.dataset.directory)): file_checksum(str(p)) for p in files},
        }


def open_ogb(
    spec: str, root: str | None = None, *, download: bool = True, keep_direction: bool = False
) -> OgbSource:
    """The OGB dataset `spec`: a dataset folder in OGB's layout (an existing path wins over a name), or a
    name (ogbn-arxiv, arxiv, products, papers100M, ...) looked up under `root` ($GTOOL_DATA, else ./data)
    and downloaded there when missing.
    Datasets gtool does not shard (heterogeneous, multi-task but not binary), and undirected ones with
    `keep_direction` (--directed), are refused with the reason, before any download."""
    if os.path.isdir(spec):
        return OgbSource(layout_of_directory(spec, keep_direction))
    info = known_dataset(spec)
    if info is None:
        raise InputError(spec, f"neither an OGB dataset ({dataset_names()}) nor a folder in OGB's layout")
    info.check_supported(spec, keep_direction)
    base = root or default_root()
    dataset = OgbLayout(Path(base) / info.dir_name, info)
    missing = dataset.missing(with_nodes=True)
    if missing and download:
        fetch(dataset, base, missing)
        missing = dataset.missing(with_nodes=True)
    if missing:
        problem = f"missing {', '.join(missing)}" + (f" after downloading {info.url}" if download else "")
        raise InputError(str(dataset.directory), f"{problem}; {dataset.how_to_get(base)}")
    return OgbSource(dataset)
