"""The Python API puts a store back in original node order, checked against the generator's own graph."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import gtool
from gtool.preprocess.sources.generators import parse_generator
from gtool.store.convert import PYG_MISSING
from gtool.store.layout import FEATURES, LABELS, PERM_COLS, PERM_ROWS, SPLIT
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


def rewrite(array: zarr.Array, change) -> None:
    """Change an array's values through zarr, so that its checksums stay valid."""
    values = array[:]
    change(values)
    array[:] = values


@pytest.mark.parametrize(
    "path, change, calls, message",
    [
        (PERM_COLS, lambda ids: ids.__setitem__(1, ids[0]), "features", "perm/c: not a permutation (1 of"),
        (
            PERM_ROWS,
            lambda ids: ids.__setitem__(5, -1),
            "to_scipy labels",
            "perm/r: node ids outside [0, 900)",
        ),
        (LABELS["r"], lambda labels: labels.__setitem__(3, 3), "labels", "labels/r: values outside [-1, 2]"),
        (
            SPLIT["r"],
            lambda codes: codes.__setitem__(3, 7),
            "split",
            "split/r: codes other than [-1, 0, 1, 2]",
        ),
        (FEATURES, lambda rows: rows.__setitem__((4, 0), np.nan), "features", "features: non-finite values"),
    ],
    ids=["repeated-id", "negative-id", "label", "split", "nan-feature"],
)
def test_node_arrays_and_matrices_refuse_values_the_format_forbids(
    stores: StoreFactory, tmp_path: Path, path: str, change, calls: str, message: str
) -> None:
    copy = stores.private_copy("sbm:900:3:6:2", tmp_path / "bad.zarr", tiles=3, seed=4)
    rewrite(zarr.open_group(copy, mode="r+")[path], change)
    store = gtool.open_store(copy)
    for call in calls.split():
        with pytest.raises(gtool.StoreError, match=re.escape(message)):
            getattr(gtool, call)(store)


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
