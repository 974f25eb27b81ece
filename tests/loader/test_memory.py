"""Peak memory (numpy and zarr allocations, via tracemalloc) of a load: within 1.5x what it returns plus a
fixed overhead, and never a whole node array."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
import zarr

from gtool.geometry.bands import band
from gtool.loader import RankData, load_rank
from gtool.loader.node_rows import read_band
from gtool.store import chunks
from tests.support.stores import StoreFactory

T = TypeVar("T")
FIXED_OVERHEAD = (
    4 << 20
)  # read-ahead (limited to 2 MiB here), zarr decode buffers, transpose chunk temporaries


def traced_peak(run: Callable[[], T]) -> tuple[T, int]:
    """run()'s result and the peak of traced allocations above what was allocated before it."""
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        result = run()
        return result, tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def medium_store(stores: StoreFactory) -> str:
    """rmat:15:16 (about 0.9M nonzeros per matrix), 4x4 tiles, two matrices, few features (node arrays are
    checked below); loaded once so that one-time initialization (imports, codecs, threads) is not measured."""
    path = stores("rmat:15:16", tiles=4, perm="double", seed=1, num_features=4, num_classes=4)
    load_rank(path, (2, 2, 2), 7, 1)
    return path


def returned_bytes(data: RankData) -> int:
    total = data.features.nbytes + data.labels.nbytes + data.split.nbytes
    for adjacency in data.shards.values():
        for tensor in (adjacency.matrix, adjacency.transpose):
            total += tensor.crow_indices().nbytes + tensor.col_indices().nbytes + tensor.values().nbytes
    return total


@pytest.mark.parametrize("rank", [0, 5])
def test_peak_memory_is_within_one_and_a_half_times_the_result(medium_store: str, rank: int) -> None:
    data, peak = traced_peak(lambda: load_rank(medium_store, (2, 2, 2), rank, 4, read_ahead_bytes=2 << 20))
    returned = returned_bytes(data)
    assert returned > 10 << 20, "the case must be large enough for the ratio to mean something"
    assert peak <= 1.5 * returned + FIXED_OVERHEAD, (
        f"peak {peak / 2**20:.1f} MiB for {returned / 2**20:.1f} MiB"
    )


def test_a_feature_band_is_read_without_the_rest_of_the_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One chunk per read: a quarter of a 6.4 MB array costs the block plus a few chunks, not the array
    (zarr's own threads decode a chunk or two alongside: 6 chunks of slack, still half the array)."""
    array = zarr.create_array(
        str(tmp_path / "x.zarr"), shape=(100_000, 16), chunks=(5_000, 16), dtype="float32"
    )
    array[:] = np.random.default_rng(0).random((100_000, 16), dtype=np.float32)
    chunk_bytes = 5_000 * 16 * 4
    monkeypatch.setattr(chunks, "BLOCK_BYTES", chunk_bytes)
    rows, cols = band(1, 2, 100_000), band(1, 2, 16)
    read_band(array, rows, cols, 0)
    (block, nbytes), peak = traced_peak(lambda: read_band(array, rows, cols, 0))
    np.testing.assert_array_equal(block, array[50_000:, 8:])
    assert nbytes == block.nbytes
    assert peak <= block.nbytes + 6 * chunk_bytes < array.nbytes, f"peak {peak / 2**20:.1f} MiB"
