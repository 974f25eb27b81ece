"""OGB arrays made memory-mappable: extracted from a deflated .npz member, or converted from .csv.gz."""

from __future__ import annotations

import numpy as np

from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.cache.entries import work_copy
from gtool.preprocess.sources.ogb.csvfiles import npy_from_csv

CSV_CONVERSION = "ogb-csv 2"
"""What converts an OGB CSV file to a .npy, named in the copy's note: a copy another conversion made is
made again, so a cached copy never outlives a change to the conversion. Change it when the conversion's
output or checks change."""


def materialize(
    array: ArrayRef | None,
    csv: str,
    workdir: str,
    shape: tuple[int, int],
    dtype: type,
    expected: str,
    *,
    edges: bool = False,
) -> ArrayRef:
    """A memory-mappable array: `array` (extracted if deflated), or else `csv` converted to a .npy
    (an edge list stored as 2 x E, see npy_from_csv)."""
    if array is not None:
        return array.prepared(workdir)
    write = npy_from_csv(csv, shape, dtype, expected=expected, edges=edges)
    size = shape[0] * shape[1] * np.dtype(dtype).itemsize
    return ArrayRef(work_copy(workdir, csv, ".npy", write, size, CSV_CONVERSION))
