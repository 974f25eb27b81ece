"""Arrays in .npy files or .npz members, opened memory-mapped on demand, and their use as node ids."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.npyio import header_lock, load_npy
from gtool.preprocess.sources.cache.entries import work_copy_path
from gtool.preprocess.sources.cache.extraction import extract_members
from gtool.preprocess.sources.fileinfo import check_readable
from gtool.preprocess.sources.npzmember import NpzMember, check_data_bytes, read_npy_header

INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class ArrayRef:
    """A .npy file (key None) or array `key` of an .npz, named in messages as array `name` of `file`.

    `file` and `name` default to `path` and the key (or 'array'); an extracted copy keeps them, so
    messages name what the user gave. Picklable: holds only paths and names.
    """

    path: str
    key: str | None = None
    file: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "file", self.file or self.path)
        object.__setattr__(self, "name", self.name or self.key or "array")

    @property
    def where(self) -> str:
        """The file, with the array's name in brackets when it is an archive member."""
        return self.file if self.name == "array" else f"{self.file}[{self.name}]"

    def member(self) -> NpzMember:
        """The .npz member this refers to (key must be set)."""
        assert self.key is not None
        return NpzMember(self.path, self.key)

    def header(self) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype, read from the header only."""
        if self.key is not None:
            member = self.member()
            return member.shape, member.dtype
        check_readable(self.path)
        with open(self.path, "rb") as f:
            shape, _, dtype = read_npy_header(f, self.where)
            check_data_bytes(shape, dtype, os.fstat(f.fileno()).st_size - f.tell(), self.where)
        return shape, dtype

    @property
    def needs_extraction(self) -> bool:
        """True for a compressed .npz member, which must be extracted before it can be memory-mapped."""
        return self.key is not None and self.member().compressed

    def open(self) -> np.ndarray:
        """The array memory-mapped read-only (a compressed member must be extracted first)."""
        if self.key is not None:
            return self.member().memmap()
        self.header()
        try:
            return load_npy(self.path)
        except ValueError as exc:
            raise InputError(self.where, f"truncated: holds less data than its shape needs ({exc})") from None

    def read_span(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) along the first axis as a C-order array (whatever the file's order), read
        from a C-order file in one sequential pass (a memory map would fault them in a page-sized read at
        a time); a compressed member must be extracted first."""
        arr = self.open()
        if (
            not isinstance(arr, np.memmap)
            or arr.filename is None
            or not arr.flags.c_contiguous
            or arr.ndim == 0
        ):
            return np.ascontiguousarray(arr[start:stop])
        shape = (stop - start,) + arr.shape[1:]
        row_bytes = arr.dtype.itemsize * math.prod(arr.shape[1:])
        offset = arr.offset + start * row_bytes
        return np.fromfile(arr.filename, dtype=arr.dtype, count=math.prod(shape), offset=offset).reshape(
            shape
        )

    def iter_flat(self, chunk_elems: int) -> Iterator[np.ndarray]:
        """The elements in storage order as 1-D arrays of <= chunk_elems: streamed out of a compressed
        member, else read from the memory map."""
        if self.needs_extraction:
            yield from self.member().iter_flat(chunk_elems)
            return
        flat = np.ravel(self.open(), order="A")
        for start in range(0, flat.shape[0], chunk_elems):
            yield np.array(flat[start : start + chunk_elems])

    def prepared(self, workdir: str) -> ArrayRef:
        """This array, or for a compressed member its copy in workdir, extracted once (same `where`)."""
        return prepare_arrays([self], workdir)[0]


def prepare_arrays(refs: list[ArrayRef], workdir: str) -> list[ArrayRef]:
    """The arrays memory-mappable: compressed members replaced by their copies in workdir (the cache, or
    the spill folder), those not there yet extracted in parallel."""
    dests = {
        i: work_copy_path(workdir, ref.path, f".{ref.key}.npy")
        for i, ref in enumerate(refs)
        if ref.needs_extraction
    }
    by_dest = {dest: refs[i].member() for i, dest in dests.items()}
    extract_members([(member, dest) for dest, member in by_dest.items()])
    return [replace(ref, path=dests[i], key=None) if i in dests else ref for i, ref in enumerate(refs)]


def load_array(ref: ArrayRef) -> np.ndarray:
    """A whole (small) array of a .npy or .npz, never unpickling."""
    if ref.key is None:
        return np.array(ref.open())
    ref.header()
    try:
        with header_lock(), np.load(ref.path, allow_pickle=False) as archive:
            return archive[ref.key]
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(ref.where, f"cannot read the array: {exc}") from None


def check_kind(dtype: np.dtype, where: str, expected: str, kinds: str = "iuf") -> None:
    """Fail unless `dtype` is of one of the numpy `kinds`; `expected` says what was wanted."""
    if dtype.kind not in kinds:
        raise InputError(where, f"expected {expected}, got dtype {dtype}")


def as_node_ids(values: np.ndarray, where: str, index_of: Callable[[int], str]) -> np.ndarray:
    """`values` as an int64 copy (floats must be whole); errors name `index_of(k)` of the first bad k."""
    check_kind(values.dtype, where, "integer node ids")
    if values.dtype.kind == "f":
        arr = np.asarray(values, dtype=np.promote_types(values.dtype, np.float64))  # float16 cannot hold 2^63
        whole = np.isfinite(arr) & (np.floor(arr) == arr) & (np.abs(arr) < 2.0**63)
        if not whole.all():
            k = int(np.flatnonzero(~whole)[0])
            raise InputError(where, f"expected an integer node id, got {float(arr[k])}", index=index_of(k))
    elif values.dtype.kind == "u" and values.dtype.itemsize == 8 and values.size:
        too_big = np.asarray(values) > INT64_MAX
        if too_big.any():
            k = int(np.flatnonzero(too_big)[0])
            raise InputError(where, f"node id {values[k]} does not fit in int64", index=index_of(k))
    return np.array(values, dtype=np.int64)
