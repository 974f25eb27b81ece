"""Node features stored as a CSR matrix in an .npz ({prefix}data, indices, indptr, shape), read densely.

Rows are densified to float32 a bounded block at a time (duplicate entries summed, as scipy's todense
does), so the dense matrix never needs to fit in memory.
"""

from __future__ import annotations

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, check_kind
from gtool.preprocess.sources.base import FeatureSource, refuse_non_finite
from gtool.preprocess.sources.fileinfo import READ_BYTES
from gtool.preprocess.sources.sparse.compressed import Compressed, read_shape


class CsrFeatures(FeatureSource):
    """A (nodes x features) CSR matrix of an .npz as float32 features, read by rows."""

    on_disk = True

    def __init__(self, path: str, prefix: str):
        rows, cols = read_shape(path, f"{prefix}shape")
        self.matrix = Compressed.open(path, prefix, True, (rows, cols))
        self.data = ArrayRef(path, f"{prefix}data")
        shape, dtype = self.data.header()
        check_kind(dtype, self.data.where, "numeric feature values", "biuf")
        if shape != (self.matrix.entries,):
            expected = f"{self.matrix.entries} values (one per entry of {self.matrix.indices.name})"
            raise InputError(self.data.where, f"expected {expected}, got shape {shape}")
        self.rows, self.num_features, self.where = rows, cols, self.data.where

    @property
    def num_rows(self) -> int:
        return self.rows

    def prepare(self, workdir: str) -> None:
        self.matrix = self.matrix.prepared(workdir)
        self.data = self.data.prepared(workdir)

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        ptr = self.matrix.indptr.open()
        out = np.zeros((len(rows), self.num_features), dtype=np.float32)
        step = max(1, READ_BYTES // max(1, 4 * self.num_features))
        for start in range(0, len(rows), step):
            block = rows[start : start + step]
            first = np.asarray(ptr[block], dtype=np.int64)
            lengths = np.asarray(ptr[block + 1], dtype=np.int64) - first
            offsets = np.cumsum(lengths) - lengths
            positions = np.repeat(first - offsets, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
            cols, values = self.entries(positions)
            owners = np.repeat(np.arange(block.size, dtype=np.int64), lengths)
            np.add.at(out[start : start + step], (owners, cols), values)
        return out

    def entries(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Columns (checked in range) and float32 values (checked finite) of the entries at `positions`."""
        indices = self.matrix.indices
        cols = np.asarray(indices.open()[positions], dtype=np.int64)
        bad = np.flatnonzero((cols < 0) | (cols >= self.num_features))
        if bad.size:
            k = int(positions[bad[0]])
            problem = f"column {int(cols[bad[0]])} is outside 0..{self.num_features - 1}"
            raise InputError(indices.file, problem, index=f"{indices.name}[{k}]")
        values = np.asarray(self.data.open()[positions]).astype(np.float32)
        refuse_non_finite(values, self.data.file, lambda at: (None, f"{self.data.name}[{positions[at[0]]}]"))
        return cols, values
