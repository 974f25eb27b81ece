"""Serial reference models for a store: on the unpermuted graph (from the source) or in stored order."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from gtool.loader import load_rank
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.resolve import resolve_source
from gtool.store import layout
from gtool.store.reader import Store
from gtool.trainer.models.serial import SerialGraph
from tests.support.reference import normalized_adjacency, source_edges


def original_order(stored: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Per-node values in original node order from their copy in `perm` order (stored[i] = value[perm[i]])."""
    out = np.empty_like(stored)
    out[perm] = stored
    return out


@dataclass
class Reference:
    """A serial graph and, per node order ('r' or 'c'), the reference row of each stored position."""

    graph: SerialGraph
    rows: dict[str, np.ndarray]


@lru_cache(maxsize=16)
def unpermuted_reference(path: str, layers: int, dtype: torch.dtype) -> Reference:
    """The graph the store was made from, rebuilt from its source: Â, and node data un-permuted."""
    store = Store(path)
    n = store.num_nodes
    described = store.meta.source
    source = resolve_source(described.get("path", described["name"]), ShardOptions())
    adjacency = normalized_adjacency(*source_edges(source), n)
    pr, pc = store.perm("r"), store.perm("c")
    features = original_order(store.array(layout.FEATURES)[:], pc)
    labels = original_order(store.array(layout.LABELS["c"])[:], pc)
    split = original_order(store.array(layout.SPLIT["c"])[:], pc)
    graph = SerialGraph.from_scipy(adjacency, features, labels, split, store.num_classes, layers, dtype)
    return Reference(graph, {"r": pr, "c": pc})


@lru_cache(maxsize=16)
def stored_order_reference(path: str, layers: int, dtype: torch.dtype) -> Reference:
    """The graph as stored (what a 1x1x1 grid loads): its dropout masks match the parallel run's."""
    graph = SerialGraph.from_rank_data(load_rank(path, grid=(1, 1, 1), rank=0, layers=layers), dtype)
    identity = np.arange(graph.features.shape[0])
    store = Store(path)
    if store.two_matrices:  # layer l's output rows are in the other order than its input rows
        pr, pc = store.perm("r"), store.perm("c")
        r_from_c, c_from_r = torch.from_numpy(np.argsort(pc)[pr]), torch.from_numpy(np.argsort(pr)[pc])
        graph.residual_rows = [r_from_c if layer % 2 == 0 else c_from_r for layer in range(layers)]
    return Reference(graph, {"r": identity, "c": identity})
