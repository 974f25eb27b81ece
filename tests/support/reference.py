"""Plain serial computations on the unpermuted graph that every parallel result is checked against."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gtool.preprocess.sources.base import GraphSource
from gtool.store.reader import Store


def source_edges(source: GraphSource) -> tuple[np.ndarray, np.ndarray]:
    """All edges of a (small) source, read serially."""
    blocks = [chunk.read() for chunk in source.edge_chunks(1 << 22)]
    if not blocks:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])


def normalized_adjacency(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, *, directed: bool = False, norm: str = "sym"
) -> sp.csr_matrix:
    """Â = D^-1/2 (A + I) D^-1/2 (or A + I for norm 'none'); directed: A[dst, src] = 1 (incoming edges)."""
    rows, cols = (dst, src) if directed else (np.concatenate([src, dst]), np.concatenate([dst, src]))
    keep = rows != cols
    a = sp.coo_matrix(
        (np.ones(int(keep.sum())), (rows[keep], cols[keep])), shape=(num_nodes, num_nodes)
    ).tocsr()
    a.data[:] = 1.0
    a = (a + sp.identity(num_nodes, format="csr")).tocsr()
    if norm == "none":
        return a
    deg = np.asarray(a.sum(axis=1)).ravel()
    d = sp.diags(1.0 / np.sqrt(deg))
    return (d @ a @ d).tocsr()


def rescaled_subgraph(adjacency: sp.csr_matrix, sample: np.ndarray) -> sp.csr_matrix:
    """Â[S, S] with the off-diagonal weights divided by p = (B-1)/(N-1), self-loops kept (mini-batches)."""
    n, b = adjacency.shape[0], sample.shape[0]
    induced = adjacency[sample][:, sample].tocoo()
    scale = np.where(induced.row == induced.col, 1.0, (n - 1) / max(1, b - 1))
    return sp.csr_matrix((induced.data * scale, (induced.row, induced.col)), shape=(b, b))


def permuted(adj: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> sp.csr_matrix:
    """M[i, j] = adj[rows[i], cols[j]]."""
    return adj[rows][:, cols].tocsr()


def reassemble(store: Store, matrix: int) -> sp.csr_matrix:
    """The stored matrix rebuilt from its tiles, checking each tile is sorted and duplicate-free."""
    n, s, t = store.num_nodes, store.tile_size, store.tiles
    rows, cols, vals = [], [], []
    for i in range(t):
        for j in range(t):
            tile = store.read_tile(matrix, i, j)
            key = tile.row.astype(np.int64) * s + tile.col
            assert np.all(np.diff(key) > 0), f"tile ({i}, {j}) of A{matrix} is not sorted and unique"
            rows.append(tile.row.astype(np.int64) + i * s)
            cols.append(tile.col.astype(np.int64) + j * s)
            vals.append(tile.val)
    return sp.csr_matrix(
        (np.concatenate(vals).astype(np.float64), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )


def assert_same_sparse(got: sp.spmatrix, want: sp.spmatrix, tol: float = 1e-6) -> None:
    """Identical sparsity pattern and values within tol."""
    got, want = sp.csr_matrix(got), sp.csr_matrix(want)
    got.sort_indices()
    want.sort_indices()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=tol, atol=tol)
