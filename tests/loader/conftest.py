"""Small stores written by the pipeline, and what a rank should find in them, rebuilt from the source."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp

from gtool.preprocess.options import ShardOptions
from gtool.preprocess.resolve import resolve_source
from gtool.preprocess.sources.nodes.generated import RandomFeatures
from gtool.store import layout
from gtool.store.reader import Store
from tests.support.reference import normalized_adjacency, permuted, source_edges
from tests.support.stores import StoreFactory

GRAPH = "grid:13x11"  # N = 143: divisible by none of the band counts 2, 3
SEED, NUM_FEATURES, NUM_CLASSES = 3, 7, 4


@dataclass
class ReferenceStore:
    """A store and, independently of it, the blocks every rank must load (full arrays: small graphs only)."""

    path: str
    store: Store
    matrices: dict[int, sp.csr_matrix]
    features: np.ndarray
    labels: dict[str, np.ndarray]
    split: dict[str, np.ndarray]


def build_store(
    stores: StoreFactory, source: str, tiles: int, perm: str, num_nodes: int | None = None
) -> str:
    """The session's store of `source` with this package's node data."""
    return stores(
        source,
        tiles=tiles,
        perm=perm,
        seed=SEED,
        num_features=NUM_FEATURES,
        num_classes=NUM_CLASSES,
        num_nodes=num_nodes,
    )


def original_order(values: np.ndarray, pc: np.ndarray) -> np.ndarray:
    """Per-node values back in original node order from their pc-order copy."""
    out = np.empty_like(values)
    out[pc] = values
    return out


def reference_store(path: str, source: str, num_nodes: int | None = None) -> ReferenceStore:
    """The expected matrices from the source graph, features from the feature generator (X[pc]),
    labels and splits in both orders, checked for consistency between the two stored orders."""
    store = Store(path)
    n = store.num_nodes
    assert num_nodes in (None, n)
    adjacency = normalized_adjacency(*source_edges(resolve_source(source, ShardOptions())), n)
    pr, pc = store.perm("r"), store.perm("c")
    assert np.array_equal(np.sort(pr), np.arange(n)) and np.array_equal(np.sort(pc), np.arange(n))
    matrices = {0: permuted(adjacency, pr, pc), 1: permuted(adjacency, pc, pr)}
    features = RandomFeatures(n, NUM_FEATURES, SEED).read_rows(np.arange(n))[pc]
    labels, split = {}, {}
    for name, paths, out in (("labels", layout.LABELS, labels), ("split", layout.SPLIT, split)):
        by_node = original_order(store.array(paths["c"])[:], pc)
        assert np.array_equal(store.array(paths["r"])[:], by_node[pr]), f"{name}/r is not {name}/c re-ordered"
        out.update(r=by_node[pr], c=by_node[pc])
    return ReferenceStore(path, store, matrices, features, labels, split)


@dataclass(frozen=True)
class StoreCase:
    """A source sharded with one tile count and permutation scheme."""

    source: str
    tiles: int
    perm: str
    num_nodes: int | None = None

    def __str__(self) -> str:
        return f"{self.source}-{self.tiles}x{self.tiles}-{self.perm}"


ALIGNED = StoreCase(GRAPH, 4, "single")  # 4 tiles of 36 rows: bands of 2 align with tiles, bands of 3 do not
CUT = StoreCase(GRAPH, 5, "double")  # 5 tiles of 29 rows: every band count cuts tiles; two matrices
OTHERS = [
    StoreCase(GRAPH, 4, "none"),
    StoreCase(GRAPH, 4, "double"),
    StoreCase(GRAPH, 5, "none"),
    StoreCase(GRAPH, 5, "single"),
]
SKEWED = StoreCase(
    "rmat:7:4", 5, "double", num_nodes=131
)  # duplicate edges, self loops, isolated nodes, odd N


@pytest.fixture(scope="module")
def reference(request: pytest.FixtureRequest, stores: StoreFactory) -> ReferenceStore:
    """The store case a test is parametrized with (indirectly), built once per module, with its reference."""
    case: StoreCase = request.param
    path = build_store(stores, case.source, case.tiles, case.perm, case.num_nodes)
    return reference_store(path, case.source, case.num_nodes)
