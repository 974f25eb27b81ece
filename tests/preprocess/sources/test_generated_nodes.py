"""Node data gtool makes up: the degree order behind degree-quantile labels."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess.engine import threaded
from gtool.preprocess.sources.nodes.generated import degree_classes, degree_order


@pytest.mark.parametrize(
    "degrees",
    [
        np.array([], dtype=np.int64),
        np.array([3, 1, 3, 2, 1], dtype=np.int64),
        np.array([70_000, 65_535, 3, 65_535, 70_000, 1, 2**40, 65_534], dtype=np.int64),
        np.random.default_rng(0).zipf(1.3, 50_000).clip(max=10**9),
    ],
    ids=["empty", "small", "at-and-past-the-cap", "heavy-tailed"],
)
def test_degree_order_is_the_stable_argsort(degrees):
    np.testing.assert_array_equal(degree_order(degrees), np.argsort(degrees, kind="stable"))


def test_degree_classes_cut_the_degree_order_in_equal_parts():
    degrees = np.array([5, 1, 5, 2, 9, 1], dtype=np.int64)
    np.testing.assert_array_equal(degree_classes(degrees, 3), [1, 0, 2, 1, 2, 0])


def test_degree_classes_by_threads_are_the_quantiles_of_the_stable_order(monkeypatch):
    monkeypatch.setattr(threaded, "MIN_PART", 100)  # several threads on a small graph
    degrees = np.random.default_rng(3).zipf(1.5, 10_007).clip(max=10**6)
    order = np.argsort(degrees, kind="stable")
    expected = np.empty(degrees.shape[0], dtype=np.int64)
    expected[order] = np.arange(degrees.shape[0]) * 7 // degrees.shape[0]
    np.testing.assert_array_equal(degree_classes(degrees, 7, threads=4), expected)
