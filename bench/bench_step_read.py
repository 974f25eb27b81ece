"""Where a streamed step's feature read goes: `read_rows` against its raw parts, on a local store.

    python -m bench.bench_step_read STORE                           # batches of 80000 and 1000000
    python -m bench.bench_step_read STORE --batch-size 80000 --window 16384

A step of B rows drawn as the 'windows' schedule draws them (random windows of W consecutive positions,
W = gtool.trainer.minibatch.schedule.window_size unless --window) is read --steps times through
gtool.loader.node_rows.read_rows (zarr's orthogonal selection), then part by part over the same chunks,
one after the other in this thread: the chunk files' bytes, their crc32c, their blosc decode, and the
gather of the step's rows. Prints the median seconds per step of each, and the decoded bytes per byte
kept (a window shorter than a chunk decodes the whole chunk for its rows).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import google_crc32c
import numpy as np
import zarr
from numcodecs import blosc  # type: ignore[import-untyped]

from gtool.geometry.bands import Band
from gtool.loader.node_rows import read_rows
from gtool.store import layout
from gtool.store.reader import open_store
from gtool.trainer.minibatch.schedule import window_size

CRC_BYTES = 4
"""The crc32c codec's checksum at the end of each stored chunk."""


def step_positions(num_nodes: int, batch: int, window: int, rng: np.random.Generator) -> np.ndarray:
    """The sorted positions of one step: ceil(B / W) random windows of W positions, cut to B."""
    windows = rng.permutation(-(-num_nodes // window))[: -(-batch // window)]
    positions = (windows[:, None] * window + np.arange(window)).ravel()
    return np.sort(positions[positions < num_nodes][:batch])


def raw_parts(folder: Path, array: zarr.Array, positions: np.ndarray) -> dict[str, float]:
    """Seconds of each part of reading `positions` by hand: files, crc32c, blosc decode, gather."""
    chunk_rows = int(array.chunks[0])
    chunks = np.unique(positions // chunk_rows)
    seconds = dict.fromkeys(("files", "crc32c", "decode", "gather"), 0.0)
    out = np.empty((positions.shape[0], array.shape[1]), dtype=array.dtype)
    for chunk in chunks:
        stamps = [time.perf_counter()]
        data = (folder / array.metadata.encode_chunk_key((int(chunk), 0))).read_bytes()
        stamps.append(time.perf_counter())
        google_crc32c.value(data[:-CRC_BYTES])
        stamps.append(time.perf_counter())
        decoded = np.frombuffer(blosc.decompress(data[:-CRC_BYTES]), dtype=array.dtype)
        stamps.append(time.perf_counter())
        first, last = np.searchsorted(positions, [chunk * chunk_rows, (chunk + 1) * chunk_rows])
        out[first:last] = decoded.reshape(-1, array.shape[1])[positions[first:last] - chunk * chunk_rows]
        stamps.append(time.perf_counter())
        for part, spent in zip(seconds, np.diff(stamps), strict=True):
            seconds[part] += float(spent)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("store", type=Path, help="a local gtool store (its features blosc + crc32c)")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[80000, 1000000])
    parser.add_argument("--window", type=int, default=None, help="W (default: the schedule's)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    store = open_store(args.store)
    array = store.array(layout.FEATURES)
    cols = Band(0, 0, int(array.shape[1]), int(array.shape[1]))
    rng = np.random.default_rng(args.seed)
    row_bytes = int(array.shape[1]) * array.dtype.itemsize
    chunk_bytes = int(array.chunks[0]) * row_bytes
    print("batch    window  chunks  decoded/kept  read_rows  files  crc32c  decode  gather  parts  (s/step)")
    for batch in args.batch_size:
        window = args.window or window_size(store, batch)
        timings: dict[str, list[float]] = {"read_rows": []}
        chunks = []
        for _ in range(args.steps):
            positions = step_positions(store.num_nodes, batch, window, rng)
            chunks.append(len(np.unique(positions // int(array.chunks[0]))))
            began = time.perf_counter()
            read_rows(array, positions, cols)
            timings["read_rows"].append(time.perf_counter() - began)
            for part, seconds in raw_parts(args.store / layout.FEATURES, array, positions).items():
                timings.setdefault(part, []).append(seconds)
        median = {part: statistics.median(values) for part, values in timings.items()}
        parts = sum(seconds for part, seconds in median.items() if part != "read_rows")
        amplification = statistics.median(chunks) * chunk_bytes / (batch * row_bytes)
        print(
            f"{batch:<8} {window:>6}  {statistics.median(chunks):>6.0f}  {amplification:>12.1f}  "
            f"{median['read_rows']:>9.3f}  {median['files']:>5.3f}  {median['crc32c']:>6.3f}  "
            f"{median['decode']:>6.3f}  {median['gather']:>6.3f}  {parts:>5.3f}"
        )


if __name__ == "__main__":
    main()
