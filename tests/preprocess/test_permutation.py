"""Permutations, their inverses and gathers through them: the same whatever the number of threads."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess.engine import threaded
from gtool.preprocess.engine.threaded import gathered, scattered
from gtool.preprocess.permutation import inverse, make_permutations


@pytest.mark.parametrize("n", [0, 1, 5, 1000, 10_007])
@pytest.mark.parametrize("threads", [1, 3])
def test_inverse_by_threads_is_the_plain_inverse(n, threads, monkeypatch):
    monkeypatch.setattr(threaded, "MIN_PART", 64)  # threads for small arrays too
    perm = np.random.default_rng(n).permutation(n)
    inv = inverse(perm, threads)
    assert inv.dtype == np.int32
    np.testing.assert_array_equal(inv[perm], np.arange(n))


def test_double_permutations_are_numpys_two_draws():
    rng = np.random.default_rng(7)
    pr, pc = make_permutations("double", 1000, 7)
    np.testing.assert_array_equal(pr, rng.permutation(1000))
    np.testing.assert_array_equal(pc, rng.permutation(1000))
    assert pr.dtype == pc.dtype == np.int64


@pytest.mark.parametrize("shape", [(0,), (10_007,), (10_007, 3)])
def test_gathered_and_scattered_by_threads_are_fancy_indexing(shape, monkeypatch):
    monkeypatch.setattr(threaded, "MIN_PART", 64)
    rng = np.random.default_rng(2)
    values = rng.standard_normal(shape).astype(np.float32)
    index = rng.permutation(shape[0])
    np.testing.assert_array_equal(gathered(values, index, threads=3), values[index])
    expected = np.empty_like(values)
    expected[index] = values
    np.testing.assert_array_equal(scattered(values, index, threads=3), expected)
