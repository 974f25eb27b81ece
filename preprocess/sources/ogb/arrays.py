"""OGB arrays made memory-mappable: extracted from a deflated .npz member, or converted from .csv.gz."""

from __future__ import annotations

from gtool.preprocess.sources.arrays import ArrayRef
from gtool.preprocess.sources.fileinfo import work_copy_path
from gtool.preprocess.sources.ogb.csvfiles import csv_to_npy


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
    (an edge list stored as 2 x E, see csv_to_npy)."""
    if array is not None:
        return array.prepared(workdir)
    dest = work_copy_path(workdir, csv, ".npy")
    return ArrayRef(csv_to_npy(csv, dest, shape, dtype, expected=expected, edges=edges))
