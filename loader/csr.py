"""CSR arrays built in O(nnz): row blocks merged from (row, col)-sorted pieces, transposed by counting sort.

Nothing here sorts all entries: pieces are merged by scattering each entry straight to its place (per-row
counts, then prefix sums), and the transpose is a counting sort by column done in bounded chunks of rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

INDEX = np.int64
TRANSPOSE_CHUNK = 1 << 16
DIGIT_BITS = 16


@dataclass
class CsrArrays:
    """A CSR matrix as numpy arrays: int64 (or narrowed int32) indptr and indices, values of any dtype."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    shape: tuple[int, int]

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        return self.indptr.nbytes + self.indices.nbytes + self.values.nbytes

    def to_torch(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """A torch sparse CSR tensor (sharing memory with these arrays on the CPU).

        Invariant checks are off: the arrays are built sorted and in range by construction.
        """
        tensor = csr_tensor(
            torch.from_numpy(self.indptr),
            torch.from_numpy(self.indices),
            torch.from_numpy(self.values),
            self.shape,
        )
        return tensor.to(device)


def csr_tensor(
    crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """A torch sparse CSR tensor of these arrays, unchecked (the caller's arrays are sorted and in range).

    Every sparse CSR tensor of gtool is made here, so that torch's warnings that its CSR support is in
    beta and that invariant checks are off (each given once per process, by the first one made; the
    second on CUDA builds) are silenced in one place.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


@dataclass
class RowPiece:
    """Entries of one source (a cut tile) in a row block: rows relative to the block, sorted by (row, col)."""

    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray


class CsrBuilder:
    """Fills a CSR matrix row block by row block, in row order, into arrays allocated once.

    `capacity` is an upper bound of the nonzeros (pages never written are never touched); `finish`
    shrinks the arrays to the nonzeros actually added. `narrow`: int32 indptr and indices where the
    capacity and the shape fit (half the index bytes; nothing transposes them).
    """

    def __init__(
        self,
        shape: tuple[int, int],
        capacity: int,
        value_dtype: np.dtype | type = np.float32,
        narrow: bool = False,
    ):
        self.shape = shape
        fits = max(capacity, *shape) < np.iinfo(np.int32).max
        self.index_dtype = np.int32 if narrow and fits else INDEX
        self.row_counts = np.zeros(shape[0], dtype=INDEX)
        self.indices = np.empty(capacity, dtype=self.index_dtype)
        self.values = np.empty(capacity, dtype=value_dtype)
        self.filled = 0
        self.next_row = 0

    def add_row_block(self, first_row: int, height: int, pieces: Sequence[RowPiece]) -> None:
        """Add rows [first_row, first_row + height) from pieces whose columns increase piece to piece.

        Within a row, piece k's entries come before piece k+1's: each entry goes to
        row start + entries of that row in earlier pieces + its rank within the row in its piece.
        """
        if first_row < self.next_row:
            raise ValueError(f"row block at {first_row} is out of order (rows up to {self.next_row} added)")
        counts = [np.bincount(p.rows, minlength=height) for p in pieces]
        block_counts = np.sum(counts, axis=0, dtype=INDEX) if counts else np.zeros(height, dtype=INDEX)
        total = int(block_counts.sum())
        if self.filled + total > self.indices.shape[0]:
            raise ValueError(f"row block overflows the capacity {self.indices.shape[0]}")
        row_start = self.filled + np.cumsum(block_counts) - block_counts
        for piece, piece_counts in zip(pieces, counts, strict=True):
            start_in_piece = np.cumsum(piece_counts) - piece_counts
            dest = (row_start - start_in_piece)[piece.rows] + np.arange(piece.rows.shape[0], dtype=INDEX)
            self.indices[dest] = piece.cols
            self.values[dest] = piece.values
            row_start += piece_counts
        self.row_counts[first_row : first_row + height] = block_counts
        self.filled += total
        self.next_row = first_row + height

    def finish(self) -> CsrArrays:
        """The CSR arrays, shrunk in place to the nonzeros added (the builder must not be used after)."""
        for array in (self.indices, self.values):
            if array.shape[0] != self.filled:
                array.resize(self.filled, refcheck=False)
        indptr = np.zeros(self.shape[0] + 1, dtype=self.index_dtype)
        np.cumsum(self.row_counts, out=indptr[1:])
        return CsrArrays(indptr, self.indices, self.values, self.shape)


def stable_argsort(keys: np.ndarray, max_key: int) -> np.ndarray:
    """Stable argsort of non-negative integer keys <= max_key: LSD radix sort over 16-bit digits.

    numpy's stable sort of uint16 is a radix sort, so each digit costs O(n).
    """
    mask = (1 << DIGIT_BITS) - 1
    order = np.argsort((keys & mask).astype(np.uint16), kind="stable")
    shift = DIGIT_BITS
    while max_key >> shift:
        digit = ((keys[order] >> shift) & mask).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += DIGIT_BITS
    return order


def row_chunks(indptr: np.ndarray, chunk_entries: int) -> Iterator[tuple[int, int]]:
    """Consecutive row ranges [start, end) of about `chunk_entries` nonzeros (at least one row each)."""
    num_rows = indptr.shape[0] - 1
    start = 0
    while start < num_rows:
        end = int(np.searchsorted(indptr, indptr[start] + chunk_entries, side="right")) - 1
        end = min(max(end, start + 1), num_rows)
        yield start, end
        start = end


def column_block_bits(nnz: int, num_cols: int, chunk_entries: int) -> int:
    """log2 of the columns per block: blocks of about `chunk_entries` nonzeros, at most 2^16 columns."""
    columns = chunk_entries * num_cols // max(1, nnz)
    return min(DIGIT_BITS, max(0, columns.bit_length() - 1))


def transpose(csr: CsrArrays, chunk_entries: int = TRANSPOSE_CHUNK) -> CsrArrays:
    """The transpose as CSR, by a two-pass counting sort on column: O(nnz + rows + cols).

    Pass 1 distributes the entries, in row order and a chunk of rows at a time, to blocks of columns
    (each block's output range is contiguous and known from the column counts), storing (row, column in
    block) packed in the output index array. Pass 2 sorts each block by column in place (stable, so rows
    stay ascending within a column). Writes stay within a few streams or one block, and temporaries are
    bounded by a chunk or a block (about `chunk_entries` nonzeros), never by nnz.
    """
    num_rows, num_cols = csr.shape
    indptr = np.zeros(num_cols + 1, dtype=INDEX)
    np.cumsum(np.bincount(csr.indices, minlength=num_cols), out=indptr[1:])
    bits = column_block_bits(csr.nnz, num_cols, chunk_entries)
    block_starts = indptr[:: 1 << bits].copy()
    indices = np.empty(csr.nnz, dtype=INDEX)
    values = np.empty(csr.nnz, dtype=csr.values.dtype)
    distribute_to_column_blocks(csr, bits, block_starts, indices, values, chunk_entries)
    block_bounds = np.append(block_starts, csr.nnz)
    for lo, hi in zip(block_bounds[:-1].tolist(), block_bounds[1:].tolist(), strict=True):
        if hi - lo > 1:
            packed = indices[lo:hi]
            order = np.argsort((packed & ((1 << bits) - 1)).astype(np.uint16), kind="stable")
            indices[lo:hi] = packed[order] >> bits
            values[lo:hi] = values[lo:hi][order]
        elif hi - lo == 1:
            indices[lo] >>= bits
    return CsrArrays(indptr, indices, values, (num_cols, num_rows))


def distribute_to_column_blocks(
    csr: CsrArrays,
    bits: int,
    block_starts: np.ndarray,
    packed: np.ndarray,
    values: np.ndarray,
    chunk_entries: int,
) -> None:
    """Pass 1 of `transpose`: entry (r, c) goes to the next free slot of block c >> bits, as
    r << bits | (c mod 2^bits), in row order within each block (a stable counting sort by block)."""
    next_free = block_starts.copy()
    low = (1 << bits) - 1
    for start, end in row_chunks(csr.indptr, chunk_entries):
        lo, hi = int(csr.indptr[start]), int(csr.indptr[end])
        if hi == lo:
            continue
        cols = csr.indices[lo:hi]
        blocks = cols >> bits
        order = stable_argsort(blocks, next_free.shape[0] - 1)
        sorted_blocks = blocks[order]
        group_starts = np.flatnonzero(np.diff(sorted_blocks, prepend=-1))
        group_sizes = np.diff(group_starts, append=hi - lo)
        group_blocks = sorted_blocks[group_starts]
        dest = np.repeat(next_free[group_blocks] - group_starts, group_sizes)
        dest += np.arange(hi - lo, dtype=INDEX)
        next_free[group_blocks] += group_sizes
        rows = np.repeat(np.arange(start, end, dtype=INDEX), np.diff(csr.indptr[start : end + 1]))
        packed[dest] = (rows[order] << bits) | (cols[order] & low)
        values[dest] = csr.values[lo:hi][order]
