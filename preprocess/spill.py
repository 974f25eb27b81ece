"""The spill directory: intermediate shuffle files on local (or shared) disk, plain .npy only."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import mmap as mmap_module
import os
import re
import shutil
import threading
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from gtool.errors import GtoolError
from gtool.preprocess.npyio import load_npy
from gtool.store.writing.staging import make_folder

FOLDER_TAG = ".spill-"
SPILL_FOLDER = re.compile(rf"((?:.*/)?\.[^/]*{re.escape(FOLDER_TAG)}[0-9a-f]{{10}})(?:/|$)")
"""A run's spill folder (SpillDir) at the start of a path."""


class SpillDir:
    """Paths of every intermediate file of one run, removed when the run ends.

    The folder is named after the output (`.NAME.spill-HASH`, HASH of the output's full location), so
    runs for different outputs never share one, and a run killed before it could clean up leaves a
    folder that the next run for the same output removes.
    """

    def __init__(self, root: str | None, where: str, near: Path, target: str):
        parent = Path(root) if root else near.parent
        make_folder(parent, where)
        tag = hashlib.sha1(target.encode()).hexdigest()[:10]
        self.path = parent / f".{near.name}{FOLDER_TAG}{tag}"
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()
        self._removal: threading.Thread | None = None
        self._releases = ThreadPoolExecutor(1, thread_name_prefix="gtool-spill-release")

    def file(self, *parts: str) -> str:
        """Path of a spill file, creating its folder (make_folder_of)."""
        path = str(self.path.joinpath(*parts))
        make_folder_of(path)
        return path

    def save(self, array: np.ndarray, *parts: str) -> str:
        """Write an array as .npy (no pickles), returning its path."""
        path = self.file(*parts)
        save_to(array, path)
        return path

    def release_later(self, paths: Iterable[str]) -> None:
        """`release` these files in a thread of this process: freeing a file's blocks is the file system's
        work (seconds for a large file), which the stage after the one done with them need not wait
        for. Once the folder's removal has begun (the thread is shut down), files are left to it."""
        for path in paths:
            try:
                self._releases.submit(release, path)
            except RuntimeError:
                return

    def start_cleanup(self) -> None:
        """Start removing the folder in a thread, once the run is done with it: the unlinking then
        overlaps what is left to do (publishing, stopping the cluster); cleanup() waits for it."""
        if self._removal is None:
            self._removal = threading.Thread(target=self._remove, name="gtool-spill-cleanup", daemon=True)
            self._removal.start()

    def cleanup(self) -> None:
        """Remove the folder (waiting for a removal already started)."""
        if self._removal is not None:
            self._removal.join()
        self._remove()

    def _remove(self) -> None:
        self._releases.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.path, ignore_errors=True)


class SharedReads:
    """Spill files read by several tasks: each is released (`SpillDir.release_later`) once every task that
    reads it is done. `done` is called once per task, from one thread at a time (a StageRunner's
    `when_finished` says when, and never once the run is stopping: a task cancelled because the run failed
    may still be running and read its files, and emptying a file under a memory map kills its reader with
    SIGBUS; the spill folder goes at the end either way)."""

    def __init__(self, scratch: SpillDir, reads: Iterable[Iterable[str]]):
        self.scratch = scratch
        self.readers = Counter(path for paths in reads for path in set(paths))

    def done(self, paths: Iterable[str]) -> None:
        """A task that read `paths` is done."""
        read = set(paths)
        self.readers.subtract(read)
        self.scratch.release_later(path for path in read if self.readers[path] == 0)


def make_folder_of(path: str) -> None:
    """Make the folder of a spill file, never the run's spill folder itself: a task that runs on once its run
    ended and removed the folder (a worker of an external cluster finishes the task it has), or whose folder
    another program removed, fails (FileNotFoundError naming the folder) instead of making a folder that
    nobody removes, or a map file that would start again at 0 under entries already placed."""
    folder = SPILL_FOLDER.match(path)
    if folder and not os.path.isdir(folder.group(1)):
        raise FileNotFoundError(errno.ENOENT, "the spill folder is gone", folder.group(1))
    os.makedirs(os.path.dirname(path), exist_ok=True)


def vanished(exc: OSError, output: str) -> GtoolError | None:
    """The one-line error of a run whose spill folder (or a file in it) was removed as it ran; else None."""
    folder = SPILL_FOLDER.match(str(exc.filename or ""))
    if exc.errno != errno.ENOENT or folder is None:
        return None
    path = folder.group(1)
    inside = "" if exc.filename == path else f" (or {exc.filename} in it)"
    return GtoolError(
        f"{path}: the run's spill folder{inside} was removed while the run used it (by another program, such "
        "as a cleaner of temporary folders?): keep it while gtool runs, or give "
        f"--spill-dir elsewhere; nothing was published to {output} (a store that was there is unchanged)"
    )


def save_to(array: np.ndarray, path: str) -> None:
    """Write an array as .npy at an explicit path inside a spill directory, whole or not at all: written
    beside it, then renamed over it. A task that Dask runs again (its worker died holding the result) thus
    never changes a file under another task that is reading the first run's copy."""
    make_folder_of(path)
    part = f"{path}.{os.getpid()}-{threading.get_native_id()}.part"
    with open(part, "wb") as file:
        np.save(file, array, allow_pickle=False)
    os.replace(part, path)


def save_rows_in_order(rows: np.ndarray, order: np.ndarray, path: str, piece_bytes: int = 16 << 20) -> None:
    """Write rows[order] as a C-order .npy, gathered and written a piece at a time (no second copy of
    `rows`): the header declares C order whatever the layout of `rows`, as tofile writes C order."""
    make_folder_of(path)
    step = max(1, piece_bytes // max(1, rows[:1].nbytes))
    header = {
        "descr": np.lib.format.dtype_to_descr(rows.dtype),
        "fortran_order": False,
        "shape": (order.shape[0],) + rows.shape[1:],
    }
    with open(path, "wb") as file:
        np.lib.format.write_array_header_1_0(file, header)
        for start in range(0, order.shape[0], step):
            rows[order[start : start + step]].tofile(file)


_HEADER = re.compile(r"\{'descr': '([<>|][a-z][0-9]+)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \}")
"""The header np.save writes for the arrays of a spill directory (C order, plain numeric dtype)."""


def load(path: str, mmap: bool = True) -> np.ndarray:
    """Read a spill array, memory-mapped (read-only) by default.

    The header is matched against the one np.save writes for spill arrays: numpy's own parser (a
    literal_eval behind a lock) and np.memmap cost more per file than most of the thousands of slices a
    run reads take to copy. Any other header goes through numpy."""
    with open(path, "rb") as file:
        header = _parse_header(file.read(_HEAD_BYTES))
        if header is None:
            return load_npy(path, mmap)
        dtype, shape, offset = header
        count = math.prod(shape)
        file.seek(offset)
        if not mmap or count == 0:
            return np.fromfile(file, dtype=dtype, count=count).reshape(shape)
        mapped = mmap_module.mmap(file.fileno(), 0, access=mmap_module.ACCESS_READ)
    return np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)


def read_rows_into(path: str, start: int, stop: int, buffer: np.ndarray) -> np.ndarray:
    """Rows [start, stop) of a spill array read by one pread into the front of `buffer` (of the array's
    dtype and row shape, at least stop - start rows); returns that part of it."""
    part = buffer[: stop - start]
    fd = os.open(path, os.O_RDONLY)
    try:
        header = _parse_header(os.pread(fd, _HEAD_BYTES, 0))
        if header is None or header[0] != buffer.dtype or header[1][1:] != buffer.shape[1:]:
            raise ValueError(f"{path}: not a spill array of {buffer.dtype} rows of shape {buffer.shape[1:]}")
        _, shape, offset = header
        into = part.data.cast("B")
        if stop > shape[0] or os.preadv(fd, [into], offset + start * buffer[:1].nbytes) != into.nbytes:
            raise ValueError(f"{path}: truncated, rows {start}-{stop} of {shape[0]} are not all there")
    finally:
        os.close(fd)
    return part


def append_to(array: np.ndarray, path: str) -> int:
    """Append an array's raw bytes to a spill file that only the calling thread writes; returns where they
    start, counted in items of the array's dtype (load_raw reads the file back as one array)."""
    make_folder_of(path)
    with open(path, "ab") as file:
        end = file.tell()
        file.write(bytes(-end % array.itemsize))
        start = file.tell()
        array.tofile(file)
    return start // array.itemsize


def load_raw(path: str, dtype: np.dtype) -> np.ndarray:
    """A file of `append_to`, memory-mapped (read-only) as one array of `dtype`."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size // np.dtype(dtype).itemsize
        if size == 0:
            return np.empty(0, dtype=dtype)
        mapped = mmap_module.mmap(file.fileno(), 0, access=mmap_module.ACCESS_READ)
    return np.frombuffer(mapped, dtype=dtype, count=size)


_HEAD_BYTES = 4096
"""Bytes read to find a spill array's header (np.save pads it to a multiple of 64: 128 for these arrays)."""


def _parse_header(head: bytes) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """dtype, shape and data offset of a .npy whose header (at the start of `head`) is the one np.save
    writes for spill arrays; None for any other header."""
    size = int.from_bytes(head[8:10], "little") if head[:8] == b"\x93NUMPY\x01\x00" else 0
    match = _HEADER.match(head[10 : 10 + size].decode("latin1")) if size else None
    if match is None:
        return None
    shape = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    return np.dtype(match.group(1)), shape, 10 + size


def release(path: str) -> None:
    """Free the disk space of a spill file that is no longer needed; the emptied file goes with the folder.

    Truncated, not unlinked: on ext4 without a journal, making a file or folder slows down for a minute or
    more after many were deleted (the inode allocator steps over each recently freed inode), and the store's
    thousands of files are made after the first spill files are done with."""
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, 0)
