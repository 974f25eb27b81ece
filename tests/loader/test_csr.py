"""CSR assembly from row-sorted pieces and the counting-sort transpose, against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gtool.loader.csr import CsrArrays, CsrBuilder, RowPiece, stable_argsort, transpose


def random_csr(rows: int, cols: int, density: float, seed: int) -> sp.csr_matrix:
    matrix = sp.random(rows, cols, density=density, format="csr", random_state=seed, dtype=np.float32)
    matrix.sort_indices()
    return matrix


def cut_points(size: int, rng: np.random.Generator) -> list[int]:
    return sorted({0, size, *rng.integers(0, size + 1, 3).tolist()})


def row_sorted_piece(block: sp.csr_matrix, col_offset: int) -> RowPiece:
    """A block's entries sorted by (row, col), as a tile would hold them."""
    coo = block.tocoo()
    order = np.lexsort((coo.col, coo.row))
    return RowPiece(
        coo.row[order].astype(np.int32), coo.col[order].astype(np.int64) + col_offset, coo.data[order]
    )


def build_from_blocks(matrix: sp.csr_matrix, padded_rows: int, seed: int) -> CsrArrays:
    """Cut `matrix` into a grid of blocks and assemble it back, one row block at a time."""
    rng = np.random.default_rng(seed)
    rows, cols = matrix.shape
    builder = CsrBuilder((padded_rows, cols), matrix.nnz + 7)
    row_cuts, col_cuts = cut_points(rows, rng), cut_points(cols, rng)
    for r0, r1 in zip(row_cuts[:-1], row_cuts[1:], strict=True):
        pieces = [
            row_sorted_piece(matrix[r0:r1, c0:c1], c0)
            for c0, c1 in zip(col_cuts[:-1], col_cuts[1:], strict=True)
        ]
        builder.add_row_block(r0, r1 - r0, pieces)
    return builder.finish()


def from_scipy(matrix: sp.csr_matrix) -> CsrArrays:
    indptr, indices = matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64)
    return CsrArrays(indptr, indices, matrix.data, matrix.shape)


def assert_identical(got: CsrArrays, want: sp.csr_matrix) -> None:
    """Same indptr, indices (so sorted within rows) and values, int64 indices."""
    assert got.shape == want.shape
    assert got.indptr.dtype == np.int64 and got.indices.dtype == np.int64
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.values, want.data)


@pytest.mark.parametrize("seed", range(8))
def test_row_blocks_merge_into_sorted_csr(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, cols = (int(v) for v in rng.integers(1, 120, 2))
    matrix = random_csr(rows, cols, 0.15, seed)
    built = build_from_blocks(matrix, rows + 3, seed)
    padded = sp.vstack([matrix, sp.csr_matrix((3, cols), dtype=np.float32)]).tocsr()
    assert_identical(built, padded)
    assert built.indices.shape == (matrix.nnz,)


@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize("seed", range(4))
def test_transpose_matches_scipy(seed: int, chunk: int) -> None:
    rng = np.random.default_rng(seed)
    rows, cols = (int(v) for v in rng.integers(1, 150, 2))
    matrix = random_csr(rows, cols, 0.1, seed)
    csr = from_scipy(matrix)
    want = matrix.T.tocsr()
    want.sort_indices()
    assert_identical(transpose(csr, chunk_entries=chunk), want)


def test_transpose_with_more_column_blocks_than_one_radix_digit() -> None:
    """One column per block and 70000 columns: the distribution pass sorts on two 16-bit digits."""
    matrix = random_csr(5, 70_000, 0.001, 3)
    csr = from_scipy(matrix)
    want = matrix.T.tocsr()
    want.sort_indices()
    assert_identical(transpose(csr, chunk_entries=1), want)


def test_transpose_of_empty_matrix() -> None:
    empty = CsrArrays(np.zeros(4, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), (3, 5))
    got = transpose(empty)
    assert got.shape == (5, 3) and got.nnz == 0
    np.testing.assert_array_equal(got.indptr, np.zeros(6))


@pytest.mark.parametrize("max_key", [3, (1 << 16) - 1, (1 << 16) + 5, (1 << 40)])
def test_stable_argsort_is_stable(max_key: int) -> None:
    keys = np.random.default_rng(1).integers(0, max_key + 1, 5000)
    np.testing.assert_array_equal(stable_argsort(keys, max_key), np.argsort(keys, kind="stable"))


def test_row_blocks_out_of_order_are_refused() -> None:
    builder = CsrBuilder((4, 4), 4)
    builder.add_row_block(2, 2, [])
    with pytest.raises(ValueError, match="out of order"):
        builder.add_row_block(0, 2, [])


def test_to_torch_shares_memory() -> None:
    matrix = random_csr(6, 9, 0.3, 0)
    csr = from_scipy(matrix)
    tensor = csr.to_torch()
    assert tensor.layout == torch.sparse_csr and tensor.shape == (6, 9)
    assert tensor.col_indices().data_ptr() == csr.indices.ctypes.data
    np.testing.assert_array_equal(tensor.to_dense().numpy(), matrix.toarray())
