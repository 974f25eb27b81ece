"""One array of an .npz archive, read without loading it whole.

A stored (uncompressed) member is memory-mapped in place at its data offset inside the zip; a deflated
member is streamed: decompressed in bounded pieces to a standalone .npy file (`extract`: with ISA-L's
inflate, faster than zlib's, checked against the member's CRC-32) or iterated (`iter_flat`).
Pickled (object) arrays are refused.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Literal, cast

import numpy as np
from isal import isal_zlib

from gtool.errors import InputError
from gtool.preprocess.npyio import header_lock
from gtool.preprocess.sources.fileinfo import COPY_BYTES, check_readable
from gtool.store.writing.atomic import write_atomically

LOCAL_HEADER = struct.Struct("<4s22xHH")
LOCAL_HEADER_SIGNATURE = b"PK\x03\x04"
ISAL_ERROR = cast(type[Exception], isal_zlib.error)  # a class: isal's stubs declare it as an instance
STREAM_ERRORS = (zipfile.BadZipFile, zlib.error, ISAL_ERROR, EOFError)
RAW_DEFLATE = -15
"""wbits of a raw deflate stream (a zip member's data has no zlib header)."""
MAX_DEFLATE_RATIO = 1032
"""Deflate expands data at most about 1032-fold: a deflated member holds no more than this times its
compressed size."""


@contextmanager
def stream_errors(where: str) -> Iterator[None]:
    """Turn failures of a broken compressed stream into an InputError naming the member."""
    try:
        yield
    except STREAM_ERRORS as exc:
        raise InputError(where, f"corrupt or truncated compressed data ({exc})") from None


def open_zip(path: str) -> zipfile.ZipFile:
    """The .npz at `path` as a ZipFile, or an InputError saying why it is not one."""
    check_readable(path)
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise InputError(path, f"expected an .npz (zip) archive: {exc} (truncated or not an .npz?)") from None


def npz_keys(path: str) -> list[str]:
    """The array names of an .npz archive (member names without '.npy')."""
    with open_zip(path) as zf:
        return [name.removesuffix(".npy") for name in zf.namelist() if name.endswith(".npy")]


def read_npy_header(f: IO[bytes], where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Parse a .npy header from `f`: (shape, fortran_order, dtype); refuses object arrays."""
    try:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"unsupported .npy format version {version}")
        read = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        with header_lock():
            shape, fortran_order, dtype = read(f)
    except ValueError as exc:
        raise InputError(where, f"expected a .npy array: {exc}") from None
    if dtype.hasobject:
        raise InputError(where, f"holds Python objects (dtype {dtype}); gtool never loads pickles")
    return tuple(shape), bool(fortran_order), dtype


def check_data_bytes(shape: tuple[int, ...], dtype: np.dtype, available: int, where: str) -> None:
    """Fail when a header's shape needs more bytes of data than the file (or member) can hold: a
    truncated file, or a header that lies (shape (2, 10^12) in 24 KB), refused before anything is planned
    or allocated from that shape."""
    needed = math.prod(shape) * dtype.itemsize
    if needed > available:
        raise InputError(
            where,
            f"truncated: its header declares shape {shape} of {dtype}, {needed:,} bytes of data, but at "
            f"most {max(available, 0):,} bytes are there",
        )


class NpzMember:
    """Array `key` of the .npz at `path`: shape, dtype, order and how it is stored, read lazily."""

    def __init__(self, path: str, key: str):
        self.path = path
        self.key = key.removesuffix(".npy")
        self.where = f"{path}[{self.key}]"
        with open_zip(path) as zf:
            try:
                info = zf.getinfo(f"{self.key}.npy")
            except KeyError:
                keys = ", ".join(npz_keys(path)) or "none"
                raise InputError(path, f"no array '{self.key}' in the archive (it has: {keys})") from None
            self.info = info
            self.compressed = info.compress_type != zipfile.ZIP_STORED
            with stream_errors(self.where), zf.open(info) as f:
                self.shape, self.fortran_order, self.dtype = read_npy_header(f, self.where)
                self.header_bytes = f.tell()
        stored = MAX_DEFLATE_RATIO * info.compress_size if self.compressed else self.stored_bytes()
        check_data_bytes(self.shape, self.dtype, min(info.file_size, stored) - self.header_bytes, self.where)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of array data (after the .npy header)."""
        return self.size * self.dtype.itemsize

    def payload_offset(self) -> int:
        """Byte offset of the member's stored (maybe compressed) bytes inside the zip file."""
        with open(self.path, "rb") as f:
            f.seek(self.info.header_offset)
            signature, name_len, extra_len = LOCAL_HEADER.unpack(f.read(LOCAL_HEADER.size))
        if signature != LOCAL_HEADER_SIGNATURE:
            raise InputError(self.where, "corrupt zip: no local file header where the directory points")
        return self.info.header_offset + LOCAL_HEADER.size + name_len + extra_len

    def stored_bytes(self) -> int:
        """Bytes of the member's stored data that the file holds (less than the zip says if truncated)."""
        return min(self.info.compress_size, os.path.getsize(self.path) - self.payload_offset())

    def data_offset(self) -> int:
        """Byte offset of the array data inside the zip file (meaningful for stored members only)."""
        return self.payload_offset() + self.header_bytes

    def memmap(self) -> np.ndarray:
        """The array memory-mapped read-only in place (stored members only; extract() deflated ones)."""
        if self.compressed:
            raise ValueError(f"{self.where} is compressed and cannot be memory-mapped; extract() it first")
        if self.size == 0:
            return np.empty(self.shape, dtype=self.dtype)
        offset = self.data_offset()
        too_short = self.header_bytes + self.nbytes > self.info.file_size
        if too_short or offset + self.nbytes > os.path.getsize(self.path):
            raise InputError(self.where, "truncated: the member holds less data than its shape needs")
        order: Literal["F", "C"] = "F" if self.fortran_order else "C"
        shape = self.shape or (1,)
        mapped = np.memmap(self.path, dtype=self.dtype, mode="r", offset=offset, shape=shape, order=order)
        return mapped if self.shape else mapped.reshape(())

    def extract(
        self,
        dest_path: str,
        done: Callable[[int], None] | None = None,
        before_rename: Callable[[str], object] | None = None,
    ) -> str:
        """Stream the member, decompressing in bounded pieces, into a standalone .npy file; returns it.

        `done(n)` is called as each n bytes are written; `before_rename` as write_atomically's."""

        def copy(out: IO[bytes]) -> None:
            with stream_errors(self.where):
                for piece in self.pieces():
                    out.write(piece)
                    if done is not None:
                        done(len(piece))

        return write_atomically(dest_path, copy, before_rename)

    def pieces(self) -> Iterator[bytes]:
        """The member's content (the whole .npy file) in decompressed pieces of bounded size."""
        if self.info.compress_type != zipfile.ZIP_DEFLATED:
            with open_zip(self.path) as zf, zf.open(self.info) as f:
                yield from iter(lambda: f.read(COPY_BYTES), b"")
            return
        inflate, crc, written, pending = isal_zlib.decompressobj(RAW_DEFLATE), 0, 0, b""
        with open(self.path, "rb") as f:
            f.seek(self.payload_offset())
            left = self.info.compress_size
            while not inflate.eof and (pending or left):
                if not pending:
                    pending = f.read(min(left, COPY_BYTES))
                    left = left - len(pending) if pending else 0
                piece = inflate.decompress(pending, COPY_BYTES)
                pending = inflate.unconsumed_tail
                crc, written = isal_zlib.crc32(piece, crc), written + len(piece)
                yield piece
        if not inflate.eof or written != self.info.file_size or crc != self.info.CRC:
            raise InputError(self.where, "corrupt or truncated compressed data (its size or CRC-32 is wrong)")

    def iter_flat(self, chunk_elems: int) -> Iterator[np.ndarray]:
        """The elements in storage order (C, or F if fortran_order) as 1-D arrays of <= chunk_elems."""
        if chunk_elems < 1:
            raise ValueError(f"chunk_elems must be >= 1, got {chunk_elems}")
        itemsize = self.dtype.itemsize
        with stream_errors(self.where), open_zip(self.path) as zf, zf.open(self.info) as f:
            f.read(self.header_bytes)
            for start in range(0, self.size, chunk_elems):
                count = min(chunk_elems, self.size - start)
                buf = bytearray(count * itemsize)
                self.read_exact(f, memoryview(buf), start)
                yield np.frombuffer(buf, dtype=self.dtype)

    def read_exact(self, f: IO[bytes], view: memoryview, start: int) -> None:
        """Fill `view` from `f`, failing with an InputError naming the element where the data ended early.

        Read and copied: a zip member's readinto is BufferedIOBase's, which reads and copies just so."""
        got = 0
        while got < len(view):
            piece = f.read(len(view) - got)
            if not piece:
                raise InputError(self.where, "truncated: the member ended early", index=f"element {start}")
            view[got : got + len(piece)] = piece
            got += len(piece)
