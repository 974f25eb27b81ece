"""scipy.sparse save_npz files and GNN-benchmark .npz graphs: entries as edges, features, labels, errors."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gtool.errors import InputError
from gtool.preprocess.sources.edgefiles import open_edge_file
from gtool.preprocess.sources.nodes.files import load_features
from tests.preprocess.sources.helpers import multiset, read_all, rmat_edges

N = 256


def rmat_matrix() -> sp.coo_matrix:
    """rmat:8:4 as a 256 x 256 COO matrix (duplicates and empty rows included)."""
    src, dst = rmat_edges()
    return sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(N, N))


def entries(matrix: sp.spmatrix) -> list[tuple[int, int]]:
    """The stored entries of a matrix as a sorted list of (row, col)."""
    coo = matrix.tocoo()
    return multiset(coo.row.astype(np.int64), coo.col.astype(np.int64))


def benchmark_arrays(rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Arrays of a GNN-benchmark .npz of rmat:8:4, with its dense features and labels."""
    adj = rmat_matrix().tocsr()
    attr = sp.random(N, 12, density=0.2, format="csr", random_state=1, dtype=np.float64)
    labels = rng.integers(0, 5, N)
    arrays = {
        "adj_data": adj.data,
        "adj_indices": adj.indices,
        "adj_indptr": adj.indptr,
        "adj_shape": np.array(adj.shape),
        "attr_data": attr.data,
        "attr_indices": attr.indices,
        "attr_indptr": attr.indptr,
        "attr_shape": np.array(attr.shape),
        "labels": labels,
        "class_names": np.array(["a", "b", "c", "d", "e"]),
    }
    return arrays, attr.toarray().astype(np.float32), labels


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_scipy_npz_entries_are_the_edges(tmp_path: Path, fmt: str, compressed: bool) -> None:
    matrix = rmat_matrix().asformat(fmt)
    sp.save_npz(tmp_path / "a.npz", matrix, compressed=compressed)
    source = open_edge_file(str(tmp_path / "a.npz"))
    assert source.num_nodes() == N
    source.prepare(str(tmp_path / "work"))
    chunk = pickle.loads(pickle.dumps(source.edge_chunks(100)[1]))
    assert len(chunk.read()) == 100
    assert multiset(*read_all(source, tmp_path / "work", 100)) == entries(matrix)
    assert source.describe()["format"] == f"scipy-{fmt}"


def test_scipy_sparse_array_and_declared_count(tmp_path: Path) -> None:
    sp.save_npz(tmp_path / "a.npz", sp.csr_array(rmat_matrix()))
    source = open_edge_file(str(tmp_path / "a.npz"), num_nodes=300)
    assert source.num_nodes() == 300
    assert multiset(*read_all(source, tmp_path / "work", 64)) == entries(rmat_matrix().tocsr())


def test_benchmark_graph_with_features_and_labels(tmp_path: Path) -> None:
    arrays, features, labels = benchmark_arrays(np.random.default_rng(0))
    np.savez_compressed(tmp_path / "g.npz", **arrays)
    source = open_edge_file(str(tmp_path / "g.npz"))
    assert multiset(*read_all(source, tmp_path / "work", 100)) == entries(rmat_matrix().tocsr())
    data = source.node_data()
    assert data.labels.tolist() == labels.tolist() and data.num_classes is None
    rows = np.array([0, 3, 4, 100, 255])
    reader = pickle.loads(pickle.dumps(data.features))
    np.testing.assert_array_equal(reader.read_rows(rows), features[rows])
    assert (reader.num_rows, reader.num_features) == (N, 12)


def test_benchmark_dense_attr_matrix_and_summed_duplicates(tmp_path: Path) -> None:
    arrays, features, _ = benchmark_arrays(np.random.default_rng(0))
    dense = {k: v for k, v in arrays.items() if not k.startswith("attr_")}
    np.savez(tmp_path / "d.npz", attr_matrix=features, **dense)
    data = open_edge_file(str(tmp_path / "d.npz")).node_data()
    np.testing.assert_array_equal(data.features.read_rows(np.arange(N)), features)
    twice = {
        **arrays,
        "attr_indices": np.array([1, 1, 0]),
        "attr_indptr": np.array([0, 2, 2, 3] + [3] * (N - 3)),
        "attr_data": np.array([0.5, 0.25, 2.0]),
    }
    np.savez(tmp_path / "t.npz", **twice)
    source = open_edge_file(str(tmp_path / "t.npz"))
    source.prepare(str(tmp_path / "work"))
    got = source.node_data().features.read_rows(np.array([0, 1, 2]))
    np.testing.assert_array_equal(got[:, :2], [[0.0, 0.75], [0.0, 0.0], [2.0, 0.0]])


def bad_indptr(ptr: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "format": np.array(b"csr"),
        "shape": np.array([3, 3]),
        "indptr": ptr,
        "indices": np.array([0, 1, 2]),
        "data": np.ones(3),
    }


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({**bad_indptr(np.array([0, 3, 1, 3])), "format": np.array(b"bsr")}, "format 'bsr' is not supported"),
        ({**bad_indptr(np.array([0, 3, 1, 3])), "shape": np.array([3, 4])}, "3 x 4 is not square"),
        (bad_indptr(np.array([0, 3, 3])), r"3 entries, expected 4 \(rows \+ 1"),
        (
            {"adj_indptr": np.zeros(2), "adj_indices": np.zeros(1), "adj_shape": np.array([2])},
            "2 non-negative",
        ),
        ({"indices": np.zeros(2), "indptr": np.zeros(2)}, "scipy.sparse save_npz matrix"),
    ],
)
def test_layout_errors_name_the_array(tmp_path: Path, arrays: dict, message: str) -> None:
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=message) as info:
        open_edge_file(str(tmp_path / "bad.npz"))
    assert str(tmp_path / "bad.npz") in str(info.value)


@pytest.mark.parametrize(
    ("ptr", "message", "index"),
    [
        (np.array([1, 2, 2, 3]), "expected 0, got 1", "indptr[0]"),
        (np.array([0, 3, 1, 3]), "decreases from 3 to 1", "indptr[2]"),
        (np.array([0, 1, 2, 2]), "ends at 2, expected the 3 entries", None),
    ],
)
def test_bad_indptr_fails_in_prepare(
    tmp_path: Path, ptr: np.ndarray, message: str, index: str | None
) -> None:
    np.savez_compressed(tmp_path / "bad.npz", **bad_indptr(ptr))
    source = open_edge_file(str(tmp_path / "bad.npz"))
    with pytest.raises(InputError, match=message) as info:
        source.prepare(str(tmp_path / "work"))
    assert info.value.index == index and str(tmp_path / "bad.npz") in info.value.where


def test_feature_column_out_of_range(tmp_path: Path) -> None:
    arrays, _, _ = benchmark_arrays(np.random.default_rng(0))
    arrays["attr_indices"] = arrays["attr_indices"].copy()
    arrays["attr_indices"][5] = 12
    np.savez(tmp_path / "g.npz", **arrays)
    features = open_edge_file(str(tmp_path / "g.npz")).node_data().features
    with pytest.raises(InputError, match=r"column 12 is outside 0\.\.11") as info:
        features.read_rows(np.arange(N))
    assert info.value.index == "attr_indices[5]"


def test_scipy_csr_features_file(tmp_path: Path) -> None:
    attr = sp.random(40, 6, density=0.3, format="csr", random_state=2, dtype=np.float64)
    sp.save_npz(tmp_path / "x.npz", attr)
    features = load_features(str(tmp_path / "x.npz"))
    features.prepare(str(tmp_path / "work"))
    np.testing.assert_array_equal(features.read_rows(np.arange(40)), attr.toarray().astype(np.float32))
    sp.save_npz(tmp_path / "c.npz", attr.tocsc())
    with pytest.raises(InputError, match="sparse features must be 'csr'"):
        load_features(str(tmp_path / "c.npz"))
