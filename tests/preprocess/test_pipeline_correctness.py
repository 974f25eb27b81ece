"""Stored tiles reassembled equal Pr Â Pc^T and Pc Â Pr^T computed with scipy on the original graph."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess.sources.generators import parse_generator
from gtool.preprocess.sources.nodes.generated import RandomFeatures, degree_classes
from gtool.store import layout
from gtool.store.reader import open_store
from tests.support.reference import (
    assert_same_sparse,
    normalized_adjacency,
    permuted,
    reassemble,
    source_edges,
)
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line

CASES = [
    ("grid:7x9", 4),
    ("rmat:7:4", 3),
    ("rmat:8:8", 5),
]


def expected_matrices(source: str, n: int, directed: bool, norm: str):
    src, dst = source_edges(parse_generator(source))
    return normalized_adjacency(src, dst, n, directed=directed, norm=norm)


@pytest.mark.parametrize("perm", ["none", "single", "double", "balanced"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("source,tiles", CASES)
def test_tiles_equal_permuted_normalized_adjacency(tmp_path, source, tiles, perm, directed):
    path = make_store(source, tmp_path / "s.zarr", tiles=tiles, perm=perm, directed=directed, seed=7)
    store = open_store(path)
    n = store.num_nodes
    assert n % tiles != 0 or source == "grid:7x9"
    adj = expected_matrices(source, n, directed, "sym")
    pr, pc = store.perm("r"), store.perm("c")
    assert sorted(pr) == list(range(n)) and sorted(pc) == list(range(n))
    if perm == "none":
        np.testing.assert_array_equal(pr, np.arange(n))
    if perm in ("none", "single"):
        np.testing.assert_array_equal(pr, pc)
        assert store.matrices == [0]
    else:
        assert store.matrices == [0, 1]
        assert_same_sparse(reassemble(store, 1), permuted(adj, pc, pr))
    assert_same_sparse(reassemble(store, 0), permuted(adj, pr, pc))
    assert store.meta.nnz[0] == adj.nnz
    assert store.meta.graph == ("directed-in" if directed else "symmetrized")


def test_norm_none_stores_a_plus_identity(tmp_path):
    path = make_store("grid:5x6", tmp_path / "s.zarr", tiles=4, norm="none", seed=1)
    store = open_store(path)
    adj = expected_matrices("grid:5x6", 30, False, "none")
    assert_same_sparse(reassemble(store, 0), permuted(adj, store.perm("r"), store.perm("c")))


def test_node_data_permuted_consistently(tmp_path):
    path = make_store("rmat:8:4", tmp_path / "s.zarr", tiles=3, seed=11, num_features=6, num_classes=5)
    store = open_store(path)
    n = store.num_nodes
    pr, pc = store.perm("r"), store.perm("c")
    features = store.array(layout.FEATURES)[:]
    np.testing.assert_array_equal(
        features, RandomFeatures(n, 6, 11).read_rows(np.sort(pc))[np.argsort(np.argsort(pc))]
    )
    np.testing.assert_allclose(features.sum(axis=1), 1.0, rtol=1e-5)
    adj = expected_matrices("rmat:8:4", n, False, "none")
    degrees = np.diff(adj.indptr)
    labels = degree_classes(degrees, 5)
    np.testing.assert_array_equal(store.array(layout.LABELS["r"])[:], labels[pr])
    np.testing.assert_array_equal(store.array(layout.LABELS["c"])[:], labels[pc])
    split_r, split_c = store.array(layout.SPLIT["r"])[:], store.array(layout.SPLIT["c"])[:]
    by_node = np.empty(n, dtype=np.int8)
    by_node[pr] = split_r
    np.testing.assert_array_equal(by_node[pc], split_c)
    counts = np.bincount(by_node, minlength=3)
    assert abs(counts[0] - 0.6 * n) <= 1 and abs(counts[1] - 0.2 * n) <= 1
    assert store.num_classes == 5 and set(np.unique(labels)) == set(range(5))


def test_tiles_split_into_many_runs_and_batches(tmp_path, monkeypatch):
    """A tiny memory share per task cuts tiles into several sorted runs, written in rounds."""
    monkeypatch.setattr("gtool.preprocess.budget.MIN_GROUP_ENTRIES", 16)
    monkeypatch.setattr("gtool.preprocess.budget.MAX_GROUP_ENTRIES", 40)
    path = make_store("rmat:9:8", tmp_path / "s.zarr", tiles=3, seed=2, workers=2, chunk_edges=700)
    store = open_store(path)
    adj = expected_matrices("rmat:9:8", 512, False, "sym")
    assert store.meta.stats[0].max > 40 * 10
    assert_same_sparse(reassemble(store, 0), permuted(adj, store.perm("r"), store.perm("c")))
    assert_same_sparse(reassemble(store, 1), permuted(adj, store.perm("c"), store.perm("r")))


@pytest.mark.parametrize("workers", [1, 3])
def test_features_from_a_file_permuted_through_many_blocks_and_buckets(tmp_path, monkeypatch, workers):
    """Small chunks (9 rows) and pieces (40 rows: 5 blocks, buckets of 36 rows) on 200 nodes: X' = X[pc]."""
    monkeypatch.setattr("gtool.store.layout.FEATURE_CHUNK_BYTES", 9 * 4 * 3)
    monkeypatch.setattr("gtool.preprocess.budget.MIN_FEATURE_PIECE_BYTES", 40 * (4 * 3 + 24))
    monkeypatch.setattr("gtool.preprocess.budget.MAX_FEATURE_PIECE_BYTES", 40 * (4 * 3 + 24))
    x = np.arange(200 * 3, dtype=np.float64).reshape(200, 3) / 7
    np.save(tmp_path / "x.npy", x)
    k = np.arange(400)
    np.save(tmp_path / "e.npy", np.stack([k % 200, (k * 37 + 5) % 200]))
    path = make_store(
        str(tmp_path / "e.npy"),
        tmp_path / "s.zarr",
        tiles=3,
        features=str(tmp_path / "x.npy"),
        workers=workers,
    )
    store = open_store(path)
    features = store.array(layout.FEATURES)
    assert features.chunks == (9, 3)
    np.testing.assert_array_equal(features[:], x[store.perm("c")].astype(np.float32))
