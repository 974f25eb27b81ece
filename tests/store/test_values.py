"""The value invariants of store arrays, as gtool verify and the loader check them."""

from __future__ import annotations

import numpy as np

from gtool.store.values import first_non_finite_row, label_problem, split_problem, weight_problem


def test_value_checks() -> None:
    assert weight_problem(np.array([0.5, 1.0], np.float32)) is None
    assert weight_problem(np.array([0.5, 0.0], np.float32)) == (
        "weights that are not finite and positive (entry 1 is 0.0)"
    )
    assert "entry 0 is nan" in weight_problem(np.array([np.nan], np.float32))
    assert "entry 1 is -1.0" in weight_problem(np.array([1, -1], np.float32))
    assert label_problem(np.array([-1, 0, 3]), 4) is None
    assert label_problem(np.array([-1, 4]), 4) == "values outside [-1, 3]"
    assert label_problem(np.array([[0, 1], [-1, 2]]), 2) == "values outside [-1, 1]"
    assert split_problem(np.array([-1, 0, 1, 2], np.int8)) is None
    assert split_problem(np.array([3], np.int8)) == "codes other than [-1, 0, 1, 2]"
    assert first_non_finite_row(np.ones((3, 2), np.float32)) is None
    assert first_non_finite_row(np.array([[1, 2], [3, np.inf], [np.nan, 0]], np.float32)) == 1
