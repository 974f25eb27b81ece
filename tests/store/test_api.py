"""The Python API puts a store back in original node order, checked against the generator's own graph."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import gtool
from gtool.preprocess.sources.generators import parse_generator
from gtool.store.convert import PYG_MISSING
from tests.support.pyg import FakeData
from tests.support.reference import assert_same_sparse, normalized_adjacency, source_edges
from tests.support.stores import StoreFactory


def fake_pyg(monkeypatch: pytest.MonkeyPatch) -> None:
    module = type(sys)("torch_geometric.data")
    module.Data = FakeData
    monkeypatch.setitem(sys.modules, "torch_geometric", type(sys)("torch_geometric"))
    monkeypatch.setitem(sys.modules, "torch_geometric.data", module)


def test_a_store_back_in_original_order_is_the_generated_graph(stores: StoreFactory) -> None:
    spec, n = "sbm:900:3:6:2", 900
    store = gtool.open_store(stores(spec, tiles=3, seed=4))
    source = parse_generator(spec)
    want = normalized_adjacency(*source_edges(source), n)
    for matrix in (0, 1):
        assert_same_sparse(gtool.to_scipy(store, matrix), want)
    data = source.node_data()
    np.testing.assert_array_equal(gtool.features(store), data.features.read_rows(np.arange(n)))
    np.testing.assert_array_equal(gtool.labels(store), data.labels)
    np.testing.assert_array_equal(gtool.split(store), data.split)
    assert sum(1 for _ in store.iter_tiles(1)) == 9


def test_to_pyg_keeps_edge_direction_and_masks(stores: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pyg(monkeypatch)
    store = gtool.open_store(stores("rmat:6:4", tiles=2, directed=True))
    src, dst = source_edges(parse_generator("rmat:6:4"))
    data = gtool.to_pyg(store)
    got = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist(), strict=True))
    assert got == set(zip(src.tolist(), dst.tolist(), strict=True)) | {(v, v) for v in range(64)}
    adjacency = gtool.to_scipy(store)
    np.testing.assert_array_equal(data.edge_weight.numpy(), adjacency.tocoo().data)
    assert data.num_nodes == 64 and data.x.shape == (64, store.num_features)
    masks = data.train_mask.int() + data.val_mask.int() + data.test_mask.int()
    assert masks.max() == 1 and np.array_equal(data.y.numpy(), gtool.labels(store))


def test_to_pyg_without_torch_geometric_says_what_to_install(
    stores: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)  # where an earlier test imported PyG
    store = gtool.open_store(stores("grid:4x4", tiles=1))
    with pytest.raises(ImportError, match="pip install torch_geometric") as error:
        gtool.to_pyg(store)
    assert str(error.value) == PYG_MISSING
