"""Kipf & Welling's Planetoid loading (gcn/utils.py `load_data`), reproduced exactly.

Test rows are reordered by test.index, CiteSeer's isolated test nodes get zero rows (tx and ty padded to
cover min..max of test.index), features = vstack(allx, tx) and labels = argmax of vstack(ally, ty) with
the same reordering; split: train = range(len(y)), valid = the next 500 nodes, test = test.index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from gtool.errors import InputError
from gtool.preprocess.sources.base import refuse_non_finite
from gtool.preprocess.sources.planetoid.pickles import load_restricted, to_csr
from gtool.preprocess.sources.text.parse import show
from gtool.store import layout

NUM_VALID = 500


@dataclass
class Planetoid:
    """A Planetoid dataset as load_data returns it, with labels as class ids and the split as int8 codes."""

    features: sp.csr_matrix
    labels: np.ndarray
    split: np.ndarray
    num_classes: int


def read_test_index(path: str) -> np.ndarray:
    """ind.NAME.test.index: one node id per line."""
    ids = []
    with open(path, "rb") as f:
        for line, text in enumerate(f, start=1):
            try:
                ids.append(int(text))
            except ValueError:
                problem = f"expected one integer node id per line, got '{show(text.strip())}'"
                raise InputError(path, problem, line=line) from None
    return np.array(ids, dtype=np.int64)


def entry_index(matrix: sp.csr_matrix, k: int) -> str:
    """Row and column of stored entry k of a CSR matrix."""
    row = int(np.searchsorted(matrix.indptr, k, side="right")) - 1
    return f"row {row}, column {int(matrix.indices[k])}"


def load_matrix(path: str, columns: int | None = None) -> sp.csr_matrix:
    """A pickled CSR feature matrix (x, tx, allx), with `columns` columns if given."""
    matrix = to_csr(load_restricted(path), path)
    refuse_non_finite(matrix.data, path, lambda at: (None, entry_index(matrix, at[0])))
    if columns is not None and matrix.shape[1] != columns:
        raise InputError(path, f"{matrix.shape[1]} feature columns, expected {columns} (as in x)")
    return matrix


def load_one_hot(path: str, rows: int, columns: int | None = None) -> np.ndarray:
    """A pickled rows x C one-hot label array (y, ty, ally)."""
    obj = load_restricted(path)
    shape = getattr(obj, "shape", None)
    fits = isinstance(obj, np.ndarray) and obj.ndim == 2 and obj.shape[0] == rows
    if not fits or columns not in (None, obj.shape[1]):
        expected = f"a {rows} x {columns or 'C'} one-hot label array"
        raise InputError(path, f"expected {expected}, got {shape or type(obj).__name__}")
    return obj


def place_rows(rows: Any, at: np.ndarray, total: int) -> Any:
    """A `total`-row matrix whose row at[i] is rows[i], the others zero (Kipf's tx_extended/ty_extended)."""
    selector = sp.csr_matrix((np.ones(at.shape[0]), (at, np.arange(at.shape[0]))), shape=(total, at.shape[0]))
    return selector @ rows


def kipf_split(num_train: int, test: np.ndarray, num_nodes: int, where: str) -> np.ndarray:
    """train = range(len(y)), valid = range(len(y), len(y) + 500), test = test.index, as int8 codes."""
    if num_train + NUM_VALID > num_nodes:
        problem = f"{num_nodes} nodes, too few for {num_train} train and {NUM_VALID} valid nodes"
        raise InputError(where, problem)
    split = np.full(num_nodes, layout.SPLIT_NONE, dtype=np.int8)
    split[:num_train] = layout.SPLIT_CODES["train"]
    split[num_train : num_train + NUM_VALID] = layout.SPLIT_CODES["valid"]
    if np.any(split[test] != layout.SPLIT_NONE):
        raise InputError(where, f"test nodes among the first {num_train + NUM_VALID} (train and valid) nodes")
    split[test] = layout.SPLIT_CODES["test"]
    return split


def load_planetoid(prefix: str) -> Planetoid:
    """Features, labels and split of the files `{prefix}.x`, ... (e.g. prefix .../cora/ind.cora)."""
    x = load_matrix(f"{prefix}.x")
    allx, tx = (load_matrix(f"{prefix}.{part}", x.shape[1]) for part in ("allx", "tx"))
    y = load_one_hot(f"{prefix}.y", x.shape[0])
    ally = load_one_hot(f"{prefix}.ally", allx.shape[0], y.shape[1])
    ty = load_one_hot(f"{prefix}.ty", tx.shape[0], y.shape[1])
    index_file = f"{prefix}.test.index"
    test_reorder = read_test_index(index_file)
    test_range = np.sort(test_reorder)
    distinct = test_range.size == tx.shape[0] > 0 and np.all(np.diff(test_range) > 0)
    if not distinct or test_range[0] != allx.shape[0]:
        expected = f"{tx.shape[0]} distinct test node ids (one per row of tx), the smallest {allx.shape[0]}"
        raise InputError(index_file, f"expected {expected} (the first node after allx)")
    span = int(test_range[-1] - test_range[0]) + 1
    at = test_range - test_range[0]
    order = np.arange(allx.shape[0] + span)
    order[test_reorder] = test_range
    features = sp.vstack([allx, place_rows(tx, at, span)]).tocsr()[order]
    hot = np.vstack([ally, place_rows(ty, at, span)])[order]
    labels = np.where(hot.any(axis=1), hot.argmax(axis=1), layout.LABEL_NONE).astype(np.int64)
    split = kipf_split(y.shape[0], test_range, features.shape[0], index_file)
    return Planetoid(features, labels, split, int(y.shape[1]))
