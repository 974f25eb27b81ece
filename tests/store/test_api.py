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
from gtool.store import layout
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


def test_calls_take_a_store_or_its_path_and_refuse_what_it_does_not_hold(
    stores: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = stores("sbm:900:3:6:2", tiles=3, seed=4)
    store = gtool.open_store(path)
    monkeypatch.setenv("HOME", str(Path(path).parent))
    assert gtool.open_store(f"~/{Path(path).name}").location == path  # as a notebook user writes it
    assert gtool.to_scipy(Path(path)).nnz == gtool.to_scipy(store).nnz
    np.testing.assert_array_equal(gtool.labels(path), gtool.labels(store))
    assert gtool.verify_store(path).ok
    with pytest.raises(TypeError, match="open_store\\(\\) takes a path or URL .*, got an open Store"):
        gtool.open_store(store)
    with pytest.raises(ValueError, match="no matrix 2: the store holds A0 and A1"):
        gtool.to_scipy(store, 2)
    for call in (lambda: store.read_tile(0, 3, 0), lambda: store.tile_bounds(0, -1)):
        with pytest.raises(ValueError, match=r"no tile \(.*\): tiles are \(i, j\) with 0 <= i, j < 3"):
            call()
    with pytest.raises(ValueError, match="perm\\(\\) takes 'r'"):
        store.perm("x")
    for call, what in (
        (lambda: gtool.to_scipy(store, True), "matrix must be an int, got True \\(bool\\)"),
        (lambda: gtool.to_scipy(store, 1.0), "matrix must be an int, got 1.0 \\(float\\)"),
        (lambda: store.read_tile(0, np.True_, 0), "tile index i must be an int, got .*True"),
        (lambda: store.tile_bounds(0, "1"), "tile index j must be an int, got '1' \\(str\\)"),
    ):  # True read as damage: "missing array adj/True/0_0"
        with pytest.raises(TypeError, match=what):
            call()
    assert gtool.to_scipy(store, np.int64(1)).nnz == gtool.to_scipy(store, 1).nnz


def replace_array(group: zarr.Group, path: str, values: np.ndarray) -> None:
    """Store `values` (any shape) as the array at `path`, with valid checksums."""
    del group[path]
    group.create_array(path, shape=values.shape, dtype=values.dtype)[...] = values


def test_arrays_of_another_shape_are_refused_naming_them(stores: StoreFactory, tmp_path: Path) -> None:
    copy = stores.private_copy("sbm:900:3:6:2", tmp_path / "bad.zarr", tiles=3, seed=4)
    group = zarr.open_group(copy, mode="r+")
    col = layout.tile_array(0, 2, 1, "col")
    replace_array(group, col, group[col][:][:, None])
    store = gtool.open_store(copy)
    shapes = r"matrix A0 tile \(2, 1\): row/col/val shapes \[\((\d+),\), \(\1, 1\), \(\1,\)\], expected"
    with pytest.raises(gtool.StoreError, match=shapes):
        gtool.to_scipy(store)
    assert any("row/col/val shapes" in p for p in gtool.verify_store(store).problems)  # an IndexError before
    replace_array(group, LABELS["c"], np.zeros((), np.int64))
    with pytest.raises(gtool.StoreError, match=r"labels/c has shape \(\), expected \(900,\) \(metadata"):
        gtool.open_store(copy)


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


def test_a_predict_output_is_named_as_one(tmp_path: Path) -> None:
    """It was 'not a gtool store (no 'gtool' attributes)', as any other folder."""
    zarr.open_group(str(tmp_path / "p.zarr"), mode="w").attrs[layout.PREDICTIONS_KEY] = {"complete": True}
    with pytest.raises(gtool.StoreError, match="p.zarr: a gtool predict output .*, not a graph store"):
        gtool.open_store(str(tmp_path / "p.zarr"))
