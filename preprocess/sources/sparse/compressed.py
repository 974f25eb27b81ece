"""CSR and CSC pointer arrays of an .npz (indptr, indices) read as edges, entry range by entry range.

A chunk is a range of stored entries, however the rows fall: its outer ids (rows of a CSR, columns of
a CSC) come from a binary search in the memory-mapped indptr, its inner ids are a slice of indices.
`prepare` extracts deflated members and checks indptr once, block by block.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, as_node_ids, check_kind, load_array, prepare_arrays
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk

CHECK_BLOCK = 1 << 22


def read_shape(path: str, key: str) -> tuple[int, int]:
    """The (rows, cols) stored in array `key` of an .npz (scipy's 'shape', the benchmarks' 'adj_shape')."""
    ref = ArrayRef(path, key)
    shape = load_array(ref)
    if shape.dtype.kind not in "iu" or shape.shape != (2,) or (shape < 0).any():
        raise InputError(ref.where, f"expected 2 non-negative integers (rows, cols), got {shape!r}")
    return int(shape[0]), int(shape[1])


def one_d_ids(ref: ArrayRef) -> int:
    """Length of a 1-D integer array, checked from its header."""
    shape, dtype = ref.header()
    check_kind(dtype, ref.where, "integer indices", "iu")
    if len(shape) != 1:
        raise InputError(ref.where, f"expected a 1-D array, got shape {shape}")
    return shape[0]


@dataclass(frozen=True)
class Compressed:
    """indptr and indices of a matrix with `outer` rows (CSR) or columns (CSC) and `entries` entries."""

    indptr: ArrayRef
    indices: ArrayRef
    rows_outer: bool
    outer: int
    entries: int

    @classmethod
    def open(cls, path: str, prefix: str, rows_outer: bool, shape: tuple[int, int]) -> Compressed:
        """Arrays `{prefix}indptr` and `{prefix}indices` of the .npz, checked against `shape`."""
        indptr, indices = ArrayRef(path, f"{prefix}indptr"), ArrayRef(path, f"{prefix}indices")
        outer = shape[0] if rows_outer else shape[1]
        offsets = one_d_ids(indptr)
        if offsets != outer + 1:
            axis = "rows" if rows_outer else "columns"
            problem = f"{offsets} entries, expected {outer + 1} ({axis} + 1, shape {shape})"
            raise InputError(indptr.where, problem)
        return cls(indptr, indices, rows_outer, outer, one_d_ids(indices))

    def prepared(self, workdir: str) -> Compressed:
        """The arrays memory-mappable (deflated members extracted once), indptr checked."""
        indptr, indices = prepare_arrays([self.indptr, self.indices], workdir)
        prepared = replace(self, indptr=indptr, indices=indices)
        prepared.check_indptr()
        return prepared

    def check_indptr(self) -> None:
        """Fail unless indptr starts at 0, never decreases and ends at the number of entries."""
        ptr, where = self.indptr.open(), self.indptr.where
        if int(ptr[0]) != 0:
            raise InputError(
                self.indptr.file, f"expected 0, got {int(ptr[0])}", index=f"{self.indptr.name}[0]"
            )
        for start in range(0, ptr.shape[0] - 1, CHECK_BLOCK):
            piece = np.asarray(ptr[start : start + CHECK_BLOCK + 1], dtype=np.int64)
            down = np.flatnonzero(np.diff(piece) < 0)
            if down.size:
                i = start + int(down[0]) + 1
                problem = (
                    f"decreases from {int(ptr[i - 1])} to {int(ptr[i])}; expected a non-decreasing indptr"
                )
                raise InputError(self.indptr.file, problem, index=f"{self.indptr.name}[{i}]")
        if int(ptr[-1]) != self.entries:
            raise InputError(where, f"ends at {int(ptr[-1])}, expected the {self.entries} entries of indices")

    def chunks(self, edges_per_chunk: int) -> list[CompressedChunk]:
        """Entry ranges of at most `edges_per_chunk` entries (one, maybe empty, at least)."""
        if self.indptr.needs_extraction or self.indices.needs_extraction:
            raise RuntimeError(f"{self.indptr.file} has compressed arrays: call prepare(workdir) first")
        step = max(1, edges_per_chunk)
        return [
            CompressedChunk(self, start, min(start + step, self.entries))
            for start in range(0, max(1, self.entries), step)
        ]


@dataclass(frozen=True)
class EntryLocator:
    """Names edge k of a chunk by its index into the indices array."""

    name: str
    start: int

    def index(self, k: int) -> str:
        """Where entry k of the chunk sits, e.g. 'indices[17]'."""
        return f"{self.name}[{self.start + k}]"

    def __call__(self, k: int) -> tuple[int | None, str | None]:
        return None, self.index(k)


@dataclass(frozen=True)
class CompressedChunk(EdgeChunk):
    """Entries [start, stop) of a CSR/CSC matrix as edges row -> column."""

    matrix: Compressed
    start: int
    stop: int

    def read(self) -> EdgeBlock:
        indices = self.matrix.indices
        locate = EntryLocator(indices.name, self.start)
        if self.stop <= self.start:
            empty = np.empty(0, dtype=np.int64)
            return EdgeBlock(empty, empty, indices.file, locate=locate)
        ptr = self.matrix.indptr.open()
        first = int(np.searchsorted(ptr, self.start, side="right")) - 1
        last = int(np.searchsorted(ptr, self.stop, side="left"))
        bounds = np.clip(np.asarray(ptr[first : last + 1], dtype=np.int64), self.start, self.stop)
        outer = np.repeat(np.arange(first, last, dtype=np.int64), np.diff(bounds))
        inner = as_node_ids(indices.open()[self.start : self.stop], indices.file, locate.index)
        src, dst = (outer, inner) if self.matrix.rows_outer else (inner, outer)
        return EdgeBlock(src, dst, indices.file, locate=locate)
