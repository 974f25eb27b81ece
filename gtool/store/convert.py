"""A store back in the original node order: scipy CSR, numpy node arrays, or a torch_geometric Data.

These hold the whole graph in memory (for graphs that fit: inspection, small-scale baselines, PyG
interop); training on large graphs reads per-rank shards with gtool.loader.load_rank instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gtool.errors import StoreError
from gtool.store import layout
from gtool.store.reader import as_store
from gtool.store.values import first_non_finite_row, label_problem, split_problem

if TYPE_CHECKING:
    import scipy.sparse as sp

    from gtool.store.reader import Store, StoreLike

PYG_MISSING = (
    "gtool.to_pyg() needs torch_geometric, which is not installed (pip install torch_geometric, or "
    "pip install -e '.[pyg]' in gtool's checkout); "
    "gtool.to_scipy(), features(), labels() and split() work without it"
)


def to_scipy(store: StoreLike, matrix: int = 0) -> sp.csr_matrix:
    """The stored matrix Â (normalized, with self-loops) indexed by original node ids, as float32 CSR.

    A0[i, j] = Â[pr[i], pc[j]] and A1[i, j] = Â[pc[i], pr[j]]: each tile's entries are mapped back through
    the permutations (vectorized per tile).
    """
    import scipy.sparse as sp  # here, not at the top: `import gtool` stays free of scipy

    store = as_store(store)
    tiles = store.iter_tiles(matrix)  # checks the matrix before the permutations are read

    rows_perm, cols_perm = (
        (store.perm("r"), store.perm("c")) if matrix == 0 else (store.perm("c"), store.perm("r"))
    )
    s, n = store.tile_size, store.num_nodes
    rows, cols, vals = [], [], []
    for i, j, tile in tiles:
        rows.append(rows_perm[i * s + tile.row.astype(np.int64)])
        cols.append(cols_perm[j * s + tile.col.astype(np.int64)])
        vals.append(tile.val)
    coo = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n), dtype=np.float32
    )
    return coo.tocsr()


def original_rows(
    store: Store, path: str, order: str, problem: Callable[[np.ndarray], str | None]
) -> np.ndarray:
    """A node array stored in pr ('r') or pc ('c') order, its values checked by `problem` (the store
    format's invariant 6, as the loader checks them), put back in original node order."""
    stored = store.read(store.array(path))
    if found := problem(stored):
        raise StoreError(f"{store.location}: array {path}: {found}; the store is damaged")
    out = np.empty_like(stored)
    out[store.perm(order)] = stored
    return out


def features(store: StoreLike) -> np.ndarray:
    """float32[N, F] features by original node id (stored in pc order)."""
    return original_rows(as_store(store), layout.FEATURES, "c", non_finite_problem)


def labels(store: StoreLike) -> np.ndarray:
    """int64 labels by original node id (-1: none)."""
    opened = as_store(store)
    classes = opened.num_classes
    return original_rows(opened, layout.LABELS["r"], "r", lambda values: label_problem(values, classes))


def split(store: StoreLike) -> np.ndarray:
    """int8 split codes by original node id: 0 train, 1 valid, 2 test, -1 none."""
    return original_rows(as_store(store), layout.SPLIT["r"], "r", split_problem)


def non_finite_problem(values: np.ndarray) -> str | None:
    """Features must be finite."""
    row = first_non_finite_row(values)
    return None if row is None else f"non-finite values (first in stored row {row})"


def to_pyg(store: StoreLike) -> Any:
    """A torch_geometric.data.Data of the whole graph in original node order.

    edge_index[:, e] = (source, target) with Â[target, source] stored (messages flow source -> target, as
    PyG aggregates), edge_weight the normalized weights (self-loops included: use GCNConv(normalize=False,
    add_self_loops=False) with edge_weight to reproduce gtool's layer), x, y, and train/val/test masks.
    """
    try:
        from torch_geometric.data import Data
    except ImportError:
        raise ImportError(PYG_MISSING) from None
    import torch

    store = as_store(store)
    adj = to_scipy(store, 0).tocoo()
    split_codes = split(store)
    return Data(
        x=torch.from_numpy(features(store)),
        edge_index=torch.from_numpy(np.stack([adj.col, adj.row]).astype(np.int64)),
        edge_weight=torch.from_numpy(adj.data),
        y=torch.from_numpy(labels(store)),
        train_mask=torch.from_numpy(split_codes == layout.SPLIT_CODES["train"]),
        val_mask=torch.from_numpy(split_codes == layout.SPLIT_CODES["valid"]),
        test_mask=torch.from_numpy(split_codes == layout.SPLIT_CODES["test"]),
        num_nodes=store.num_nodes,
    )
