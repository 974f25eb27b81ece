"""numpy's form of every shard kernel gives numba's bits, on random inputs and on the edge cases (empty
inputs, loops, mirrors, other integer and float types); and which form a call takes."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from gtool.preprocess import kernels
from gtool.preprocess.kernels import randomfeatures, rmat, shuffle, tiles
from gtool.preprocess.partitions import PartitionPlan

pytestmark = pytest.mark.parametrize("kernel_form", ["both"], indirect=False)


def both(fn, *args):
    """fn(*args) in numpy's form and in numba's (each on its own copies of the arguments)."""
    results = []
    for compiled in (False, True):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        with kernels.forced(compiled):
            results.append((fn(*copies), copies))
    return results


def assert_same(a, b) -> None:
    """Equal values, dtypes and shapes, through tuples and lists."""
    if isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("n, tiles_, edges", [(1000, 4, 5000), (997, 3, 3001), (50, 1, 200), (4096, 16, 0)])
@pytest.mark.parametrize("mirror, keep_loops", [(True, False), (False, False), (False, True)])
@pytest.mark.parametrize("ids", [np.int64, np.int32])
def test_bucket_entries(n, tiles_, edges, mirror, keep_loops, ids):
    rng = np.random.default_rng(n + edges)
    rows, cols = rng.integers(0, n, edges).astype(ids), rng.integers(0, n, edges).astype(ids)
    rows[: edges // 10] = cols[: edges // 10]
    inverses = [rng.permutation(n).astype(t) for t in (np.int32, np.int64)]
    plan = PartitionPlan(n, tiles_)
    (plain, _), (compiled, _) = both(shuffle.bucket_entries, rows, cols, *inverses, plan, mirror, keep_loops)
    assert_same(plain, compiled)


@pytest.mark.parametrize("ranges", [[], [(0, 0)], [(3, 9), (0, 2), (9, 9), (20, 31)]])
def test_gather_ranges(ranges):
    source = np.arange(100, 140, dtype=np.int64)
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    stops = np.array([b for _, b in ranges], dtype=np.int64)
    out = np.full(50, -1, dtype=np.int64)
    (plain, plain_args), (compiled, compiled_args) = both(shuffle.gather_ranges, source, starts, stops, out)
    assert plain == compiled
    assert_same(plain_args[3], compiled_args[3])


@pytest.mark.parametrize("count_slabs", [False, True])
@pytest.mark.parametrize("size", [0, 1, 3000])
def test_unique_counted(count_slabs, size):
    plan = PartitionPlan(5000, 4)
    s = plan.tile_size
    rng = np.random.default_rng(size)
    keys = np.sort(rng.integers(300 * s, 600 * s, size))
    counted = both(shuffle.unique_counted, keys, plan, 300, 300, count_slabs)
    (plain, plain_args), (compiled, compiled_args) = counted
    assert_same(plain, compiled)
    assert_same(plain_args[0], compiled_args[0])  # compacted in place alike
    (plain, _), (compiled, _) = both(shuffle.unique_counted, keys, plan, 0, 0, count_slabs)
    assert_same(plain, compiled)


def test_split_keys_and_weights():
    rng = np.random.default_rng(1)
    keys = np.sort(rng.choice(97 * 97, 500, replace=False)).astype(np.int64)
    (plain, _), (compiled, _) = both(tiles.split_keys, keys, 97)
    assert_same(plain, compiled)
    rows, cols = plain
    for scale_type in (np.float32, np.float64):
        row_scale, col_scale = rng.random(300).astype(scale_type), rng.random(300).astype(scale_type)
        (a, _), (b, _) = both(tiles.weights, rows, cols, row_scale, col_scale, 101, 7)
        assert_same(a, b)


@pytest.mark.parametrize("lo, hi", [(0, 97), (10, 11), (40, 80), (5, 5)])
@pytest.mark.parametrize("runs", [0, 1, 3])
def test_transpose_runs(lo, hi, runs):
    rng = np.random.default_rng(runs)
    bounds = np.linspace(0, 97, runs + 1).astype(np.int64)
    parts = [
        np.sort(rng.choice(np.arange(a * 97, b * 97), min(50, (b - a) * 97), replace=False)).astype(np.int64)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    results = []
    for compiled in (False, True):
        with kernels.forced(compiled):
            results.append(tiles.transpose_runs(parts, lo, hi, 97))
    assert_same(*results)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("seed", [0, 12345678901])
def test_uniform_values(normalize, seed):
    rows = np.array([0, 5, 2**40, 7, 123456], dtype=np.int64)
    for features in (1, 3, 129):
        (plain, _), (compiled, _) = both(randomfeatures.uniform_values, rows, features, seed, normalize)
        assert_same(plain, compiled)


@pytest.mark.parametrize("first_bit, bits", [(0, 8), (8, 8), (16, 3)])
def test_set_bits(first_bit, bits):
    rng = np.random.default_rng(first_bit)
    draws = rng.integers(0, 1 << 16, (bits, 1000), dtype=np.uint16)
    thresholds = tuple(np.uint16(t) for t in (37355, 49807, 62259))
    src, dst = rng.integers(0, 1 << first_bit, 1000), rng.integers(0, 1 << first_bit, 1000)
    (_, plain), (_, compiled) = both(rmat.set_bits, draws, first_bit, thresholds, src, dst)
    assert_same(plain[3:], compiled[3:])


def test_a_call_takes_numba_once_loaded_or_when_it_pays(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert not kernels.compiled_pays(kernels.COMPILE_AT - 1)
    assert kernels.compiled_pays(kernels.COMPILE_AT)
    with kernels.forced(True):
        assert kernels.compiled_pays(0)
    monkeypatch.setitem(sys.modules, "numba", sys)
    assert kernels.compiled_pays(0)
    with kernels.forced(False):
        assert not kernels.compiled_pays(kernels.COMPILE_AT)
