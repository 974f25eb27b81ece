"""The class count of labels: given, declared by the source, or inferred only when plausible."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.errors import InputError
from gtool.preprocess.sources.nodes.classes import MAX_INFERRED_CLASSES, class_count

LABELS = np.array([0, 2, -1, 1, 2, 0])


def test_inferred_given_declared_and_multi_label() -> None:
    assert class_count(LABELS, None, None, "y.npy") == 3
    assert class_count(np.array([0, 5, 1]), None, None, "y.npy") == 6  # 6 <= 2 x 3 distinct labels
    assert class_count(LABELS, 40, None, "y.npy") == 40
    assert class_count(LABELS, None, 7, "y.npy") == 7
    assert class_count(np.zeros((6, 4), np.int64), None, None, "y.npy") == 4
    assert class_count(np.full(6, -1), None, None, "y.npy") == 1


def test_one_stray_label_needs_the_class_count_given() -> None:
    stray = LABELS.copy()
    stray[4] = 10**9
    with pytest.raises(InputError, match=r"largest label, 1,000,000,000, would make 1,000,000,001 classes"):
        class_count(stray, None, None, "y.npy")
    assert class_count(stray, None, 10**9 + 1, "y.npy") == 10**9 + 1
    gaps = np.array([0, 1, 50])
    with pytest.raises(InputError, match=r"more than 2x the 3 distinct labels that occur; .* --num-classes"):
        class_count(gaps, None, None, "y.npy")
    many = np.arange(MAX_INFERRED_CLASSES + 1)
    with pytest.raises(InputError, match=f"the {MAX_INFERRED_CLASSES:,} classes gtool infers"):
        class_count(many, None, None, "y.npy")


def test_labels_checked_against_the_class_count() -> None:
    with pytest.raises(InputError, match=r"y.npy, node 1: label 2 is >= the 2 classes --num-classes gives"):
        class_count(LABELS, None, 2, "y.npy")
    with pytest.raises(InputError, match=r"label 2 is >= the 2 classes the source declares"):
        class_count(LABELS, 2, None, "y.npy")
    with pytest.raises(InputError, match="4 label columns, but --num-classes is 3"):
        class_count(np.zeros((6, 4), np.int64), None, 3, "y.npy")
