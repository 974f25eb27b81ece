"""Parsing .npy headers safely from many threads at once.

numpy parses a .npy header with ast.literal_eval, which CPython 3.11 does not make thread-safe:
concurrent calls from Dask's worker threads can fail with "AST constructor recursion depth mismatch".
Every header parse in gtool goes through one lock; the data itself is read outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

_HEADER_LOCK = threading.Lock()


@contextmanager
def header_lock() -> Iterator[None]:
    """Hold while numpy parses a .npy header (np.load, read_array_header_*, NpzFile item access)."""
    with _HEADER_LOCK:
        yield


def load_npy(path: str, mmap: bool = True) -> np.ndarray:
    """A .npy file memory-mapped read-only, or (mmap=False) read into memory; never unpickles."""
    with header_lock():
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    return array if mmap else np.array(array)
