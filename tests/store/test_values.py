"""The value invariants of store arrays, as gtool verify and the loader check them."""

from __future__ import annotations

import numpy as np

from gtool.store.values import (
    DIGESTS,
    first_non_finite_row,
    label_problem,
    node_value_digest,
    permutation_problem,
    split_problem,
    weight_problem,
)


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


def test_a_permutation_holds_every_node_id_once() -> None:
    assert permutation_problem(np.array([2, 0, 1]), 3) is None
    assert permutation_problem(np.array([0, 0, 1]), 3) == "not a permutation (1 of 3 node ids never appear)"
    assert permutation_problem(np.array([0, -1, 1]), 3) == "node ids outside [0, 3)"
    assert permutation_problem(np.array([0, 1, 3]), 3) == "node ids outside [0, 3)"
    assert permutation_problem(np.array([0, 1]), 3) == "shape (2,), expected (3,)"


def test_the_node_value_digest_ignores_the_order_and_sees_a_changed_or_moved_value() -> None:
    rng = np.random.default_rng(0)
    ids, labels = rng.permutation(1000), rng.integers(-1, 7, 1000)
    order = rng.permutation(1000)
    digest = node_value_digest(ids, labels)
    assert node_value_digest(ids[order], labels[order]) == digest
    blocks = [
        node_value_digest(ids[order][k : k + 300], labels[order][k : k + 300]) for k in range(0, 1000, 300)
    ]
    assert sum(blocks) % DIGESTS == digest  # as verify adds up its blocks
    swapped = labels.copy()
    other = int(np.flatnonzero(labels != labels[0])[0])
    swapped[[0, other]] = swapped[[other, 0]]  # the same values, two nodes' exchanged
    assert node_value_digest(ids, swapped) != digest
    multi = rng.integers(0, 2, (1000, 3))
    assert node_value_digest(ids[order], multi[order]) == node_value_digest(ids, multi)
    assert node_value_digest(ids, multi[:, ::-1]) != node_value_digest(ids, multi)
