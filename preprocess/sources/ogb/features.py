"""OGB node features: `node_feat` of raw/data.npz, or raw/node-feat.csv.gz converted to a .npy."""

from __future__ import annotations

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.base import FeatureSource, refuse_non_finite
from gtool.preprocess.sources.ogb.csvfiles import count_columns
from gtool.preprocess.sources.ogb.mappable import materialize


class OgbFeatures(FeatureSource):
    """N x F features read by rows from a memory-mapped array; `prepare` makes that array when needed."""

    on_disk = True

    def __init__(self, where: str, num_rows: int, num_features: int, array: ArrayRef | None):
        self.where = where
        self.num_features = num_features
        self._num_rows = num_rows
        self.array = array
        self.ready = array is not None and not array.needs_extraction

    @classmethod
    def from_npz(cls, path: str, num_rows: int) -> OgbFeatures:
        """`node_feat` of an OGB binary data.npz: N x F numbers."""
        array = ArrayRef(path, "node_feat")
        shape, dtype = array.header()
        if len(shape) != 2 or dtype.kind not in "iuf":
            raise InputError(array.where, f"expected N x F numbers, got shape {shape}, dtype {dtype}")
        if shape[0] != num_rows:
            raise InputError(array.where, f"{shape[0]} rows, expected one per node ({num_rows})")
        return cls(array.where, num_rows, shape[1], array)

    @classmethod
    def from_csv(cls, path: str, num_rows: int) -> OgbFeatures:
        """An OGB node-feat.csv.gz: one line of F comma-separated numbers per node."""
        return cls(path, num_rows, count_columns(path), None)

    @property
    def num_rows(self) -> int:
        return self._num_rows

    def prepare(self, workdir: str) -> None:
        """Convert node-feat.csv.gz to a float32 .npy, or extract a deflated node_feat, into workdir."""
        if self.ready:
            return
        expected = "nodes that num-node-list.csv.gz declares"
        shape = (self._num_rows, self.num_features)
        self.array = materialize(self.array, self.where, workdir, shape, np.float32, expected)
        self.ready = True

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        block = np.asarray(self.prepared_array().open()[rows], dtype=np.float32)
        refuse_non_finite(block, self.where, lambda at: self.locate(int(rows[at[0]]), at[1]))
        return block

    def read_block(self, start: int, stop: int) -> np.ndarray:
        block = np.asarray(self.prepared_array().read_span(start, stop), dtype=np.float32)
        refuse_non_finite(block, self.where, lambda at: self.locate(start + at[0], at[1]))
        return block

    def prepared_array(self) -> ArrayRef:
        if not self.ready or self.array is None:
            raise RuntimeError(f"{self.where}: call prepare(workdir) before reading feature rows")
        return self.array

    def locate(self, row: int, column: int) -> tuple[int | None, str | None]:
        """Where feature (row, column) is: its line and column in the CSV, else its row and column."""
        if self.where.endswith(".csv.gz"):
            return row + 1, f"column {column + 1}"
        return None, f"row {row}, column {column}"
