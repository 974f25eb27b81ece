"""Work over N positions cut among threads of this process (for numpy calls that release the GIL)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

MIN_PART = 1 << 20
"""Positions a thread takes at least (fewer are not worth a thread)."""


def in_parts(n: int, threads: int, work: Callable[[int, int], object]) -> None:
    """work(a, b) for [0, n) cut into near-equal parts [a, b), one thread each, at most `threads` of them
    (one part, run here, when n is small). Scatters and gathers through a permutation wait on memory;
    several threads wait on it at once."""
    parts = min(max(1, threads), max(1, n // MIN_PART))
    if parts == 1:
        work(0, n)
        return
    cuts = [n * k // parts for k in range(parts + 1)]
    with ThreadPoolExecutor(parts, thread_name_prefix="gtool-part") as pool:
        list(pool.map(work, cuts[:-1], cuts[1:]))


def gathered(values: np.ndarray, index: np.ndarray, threads: int) -> np.ndarray:
    """values[index] (along the first axis), gathered in parts by up to `threads` threads."""
    out = np.empty(index.shape[:1] + values.shape[1:], dtype=values.dtype)

    def gather(start: int, stop: int) -> None:
        np.take(values, index[start:stop], axis=0, out=out[start:stop])

    in_parts(index.shape[0], threads, gather)
    return out


def scattered(values: np.ndarray, index: np.ndarray, threads: int) -> np.ndarray:
    """out with out[index] = values (`index` a permutation), scattered in parts by up to `threads` threads."""
    out = np.empty(index.shape[:1] + values.shape[1:], dtype=values.dtype)

    def scatter(start: int, stop: int) -> None:
        out[index[start:stop]] = values[start:stop]

    in_parts(index.shape[0], threads, scatter)
    return out
