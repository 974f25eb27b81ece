"""scipy.sparse and GNN-benchmark .npz files give the same store, array by array, as the same graph
written as an edge list with its features and labels as .npy files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from gtool.store import layout
from tests.preprocess.sources.sparse.test_sparse_npz import N, benchmark_arrays, rmat_matrix
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line

OPTIONS = {"tiles": 3, "seed": 4, "chunk_edges": 300}


def store_arrays(path: str) -> dict[str, np.ndarray]:
    """Every array of a store by its path."""
    members = zarr.open_group(path, mode="r").members(max_depth=None)
    return {name: node[...] for name, node in members if isinstance(node, zarr.Array)}


def assert_same_arrays(got: str, want: str) -> None:
    got_arrays, want_arrays = store_arrays(got), store_arrays(want)
    assert sorted(got_arrays) == sorted(want_arrays)
    assert {layout.FEATURES, layout.PERM_ROWS, layout.LABELS["r"]} <= set(want_arrays)
    for name, array in want_arrays.items():
        np.testing.assert_array_equal(got_arrays[name], array, err_msg=name)


def edge_list_store(tmp_path: Path, matrix: sp.spmatrix, **node_files: str) -> str:
    coo = matrix.tocoo()
    lines = "".join(f"{r} {c}\n" for r, c in zip(coo.row.tolist(), coo.col.tolist(), strict=True))
    (tmp_path / "edges.txt").write_text(lines)
    store = tmp_path / "ref.zarr"
    return make_store(str(tmp_path / "edges.txt"), store, num_nodes=N, **OPTIONS, **node_files)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_scipy_npz_store_equals_edge_list_store(tmp_path: Path, fmt: str) -> None:
    matrix = rmat_matrix().asformat(fmt)
    sp.save_npz(tmp_path / "a.npz", matrix)
    got = make_store(str(tmp_path / "a.npz"), tmp_path / "a.zarr", **OPTIONS)
    assert_same_arrays(got, edge_list_store(tmp_path, matrix))


def test_benchmark_npz_store_equals_edge_list_store(tmp_path: Path) -> None:
    arrays, features, labels = benchmark_arrays(np.random.default_rng(3))
    np.savez_compressed(tmp_path / "g.npz", **arrays)
    got = make_store(str(tmp_path / "g.npz"), tmp_path / "g.zarr", **OPTIONS)
    np.save(tmp_path / "x.npy", features)
    np.save(tmp_path / "y.npy", labels)
    matrix = sp.csr_matrix((arrays["adj_data"], arrays["adj_indices"], arrays["adj_indptr"]), shape=(N, N))
    want = edge_list_store(tmp_path, matrix, features=str(tmp_path / "x.npy"), labels=str(tmp_path / "y.npy"))
    assert_same_arrays(got, want)
    assert zarr.open_group(got, mode="r")[layout.FEATURES].shape == (N, 12)
