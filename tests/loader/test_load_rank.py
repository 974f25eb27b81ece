"""Every rank of several grids loads exactly the reference blocks of the graph it was sharded from."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gtool.loader import RankData, load_rank
from tests.loader.conftest import ALIGNED, CUT, OTHERS, SKEWED, ReferenceStore, StoreCase
from tests.loader.expected import Range, feature_ranges, label_range, layer_rects

GRIDS = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 2), (3, 2, 1)]


def cases(
    stores: list[StoreCase], grids: list[tuple[int, int, int]], layers: list[int]
) -> list[tuple[StoreCase, tuple[int, int, int], int]]:
    return [(store, dims, n) for store in stores for dims in grids for n in layers]


# Every grid and layer count on an aligned and a cut tiling; on the other tilings and schemes, the grids
# with a depth axis at L = 1 (pr order, plane 0) and L = 4 (pc order, every plane, both matrices); the
# skewed graph on the least regular grid.
LOAD_CASES = (
    cases([ALIGNED, CUT], GRIDS, [1, 2, 3, 4])
    + cases(OTHERS, [(1, 1, 2), (2, 2, 2), (3, 2, 1)], [1, 4])
    + cases([SKEWED], [(3, 2, 1)], [1, 2, 3, 4])
)


def padded_block(full: np.ndarray, rows: Range, cols: Range | None, fill: float) -> np.ndarray:
    """full[rows, cols] padded to the band sizes with `fill`."""
    block = (
        full[rows.start : rows.stop] if cols is None else full[rows.start : rows.stop, cols.start : cols.stop]
    )
    shape = (rows.size, *block.shape[1:]) if cols is None else (rows.size, cols.size)
    out = np.full(shape, fill, dtype=full.dtype)
    out[tuple(slice(0, n) for n in block.shape)] = block
    return out


def assert_sorted_csr(tensor: torch.Tensor, shape: tuple[int, int]) -> None:
    """int64 CSR of the given shape whose column indices strictly increase within every row."""
    assert tensor.layout == torch.sparse_csr and tuple(tensor.shape) == shape
    crow, col = tensor.crow_indices().numpy(), tensor.col_indices().numpy()
    assert crow.dtype == np.int64 and col.dtype == np.int64 and tensor.values().dtype == torch.float32
    row_of = np.repeat(np.arange(shape[0]), np.diff(crow))
    same_row = row_of[1:] == row_of[:-1]
    assert np.all(np.diff(col)[same_row] > 0)


def check_shards(
    data: RankData, ref: ReferenceStore, dims: tuple[int, int, int], rank: int, layers: int
) -> None:
    n = ref.store.num_nodes
    rects = layer_rects(dims, rank, layers, n, ref.store.two_matrices)
    distinct = {(r.matrix, r.rows, r.cols) for r in rects}
    assert len(data.shards) == len(distinct) <= min(6 if ref.store.two_matrices else 3, layers)
    for layer, rect in enumerate(rects):
        shard = data.shard(layer)
        assert shard.matrix_id == rect.matrix
        assert (shard.row_band.start, shard.row_band.stop, shard.row_band.size) == tuple(
            vars(rect.rows).values()
        )
        assert (shard.col_band.start, shard.col_band.stop, shard.col_band.size) == tuple(
            vars(rect.cols).values()
        )
        want = padded_block(ref.matrices[rect.matrix].toarray(), rect.rows, rect.cols, 0.0)
        assert_sorted_csr(shard.matrix, want.shape)
        assert_sorted_csr(shard.transpose, want.T.shape)
        got = shard.matrix.to_dense().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        assert shard.nnz == np.count_nonzero(want)
        np.testing.assert_array_equal(shard.transpose.to_dense().numpy(), got.T)


def check_node_blocks(
    data: RankData, ref: ReferenceStore, dims: tuple[int, int, int], rank: int, layers: int
) -> None:
    n, f = ref.store.num_nodes, ref.store.num_features
    rows, cols = feature_ranges(dims, rank, n, f)
    assert data.features.dtype == torch.float32
    stored = ref.store.array("nodes/features")[:]
    np.testing.assert_array_equal(data.features.numpy(), padded_block(stored, rows, cols, 0.0))
    np.testing.assert_allclose(data.features.numpy(), padded_block(ref.features, rows, cols, 0.0), rtol=1e-6)
    label_rows, order = label_range(dims, rank, layers, n)
    np.testing.assert_array_equal(data.labels.numpy(), padded_block(ref.labels[order], label_rows, None, -1))
    np.testing.assert_array_equal(data.split.numpy(), padded_block(ref.split[order], label_rows, None, -1))
    assert data.split.dtype == torch.int8


def case_id(value: object) -> str:
    return (
        "x".join(map(str, value))
        if isinstance(value, tuple)
        else f"L{value}"
        if isinstance(value, int)
        else str(value)
    )


@pytest.mark.parametrize(
    ("reference", "dims", "layers"), LOAD_CASES, indirect=["reference"], ids=case_id, scope="module"
)
def test_every_rank_loads_its_reference_blocks(
    reference: ReferenceStore, dims: tuple[int, int, int], layers: int
) -> None:
    for rank in range(math.prod(dims)):
        data = load_rank(reference.store, dims, rank, layers)
        assert (data.rank, data.layers, data.grid.dims) == (rank, layers, dims)
        check_shards(data, reference, dims, rank, layers)
        check_node_blocks(data, reference, dims, rank, layers)
        assert data.read.tiles > 0 and data.read.bytes > 0 and data.read.seconds > 0
