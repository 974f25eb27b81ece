"""Arrays of a dataset read without loading them: a .npy file or a member of an .npz archive."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from gtool.preprocess.sources.fileinfo import check_readable, work_copy_path
from gtool.preprocess.sources.npzmember import NpzMember, read_npy_header
from gtool.preprocess.sources.ogb_csv import csv_to_npy


@dataclass(frozen=True)
class StoredArray:
    """A .npy file (key None) or array `key` of an .npz archive; picklable, opened read-only on demand."""

    path: str
    key: str | None = None

    @property
    def where(self) -> str:
        """How errors name the array: the file, plus the member in brackets."""
        return self.path if self.key is None else f"{self.path}[{self.key}]"

    def member(self) -> NpzMember:
        """The .npz member (only for key is not None)."""
        if self.key is None:
            raise ValueError(f"{self.path} is a .npy file, not an .npz member")
        return NpzMember(self.path, self.key)

    def header(self) -> tuple[tuple[int, ...], np.dtype]:
        """(shape, dtype), read from the .npy header without touching the data."""
        if self.key is not None:
            member = self.member()
            return member.shape, member.dtype
        check_readable(self.path)
        with open(self.path, "rb") as f:
            shape, _, dtype = read_npy_header(f, self.path)
        return shape, dtype

    @property
    def compressed(self) -> bool:
        """True for a deflated .npz member, which must be extracted before it can be memory-mapped."""
        return self.key is not None and self.member().compressed

    def open(self) -> np.ndarray:
        """The array memory-mapped read-only (a deflated member must be `extracted` first)."""
        if self.key is None:
            return np.load(self.path, mmap_mode="r")
        return self.member().memmap()

    def extracted(self, workdir: str) -> StoredArray:
        """This array, or for a deflated member its .npy copy in workdir (reused when a run made it)."""
        if not self.compressed:
            return self
        dest = work_copy_path(workdir, self.path, f".{self.key}.npy")
        if not os.path.exists(dest):
            self.member().extract(dest)
        return StoredArray(dest)


def materialize(
    array: StoredArray | None,
    csv: str,
    workdir: str,
    shape: tuple[int, int],
    dtype: type,
    expected: str,
    *,
    edges: bool = False,
) -> StoredArray:
    """A memory-mappable array: `array` (extracted if deflated), or else `csv` converted to a .npy
    (an edge list stored as 2 x E, see csv_to_npy)."""
    if array is not None:
        return array.extracted(workdir)
    dest = work_copy_path(workdir, csv, ".npy")
    return StoredArray(csv_to_npy(csv, dest, shape, dtype, expected=expected, edges=edges))
