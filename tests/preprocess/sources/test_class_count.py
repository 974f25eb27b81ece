"""The class count of labels: given, declared by the source, or inferred only when plausible."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import InputError
from gtool.preprocess.sources.nodes.classes import MAX_INFERRED_CLASSES, check_class_limit, class_count

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


def test_more_classes_than_a_store_may_have_are_refused() -> None:
    """A store may have one class per node, or 100,000 on a smaller graph (the store format's limit)."""
    check_class_limit(100_000, 6, "--num-classes")
    check_class_limit(250_000, 250_000, "--num-classes")
    with pytest.raises(
        InputError, match=r"--num-classes: 100,001 classes, above the limit of 100,000 for a graph of 6 nodes"
    ):
        check_class_limit(100_001, 6, "--num-classes")
    with pytest.raises(InputError, match=r"y.npy \(the class count the source declares\): 200,000 classes"):
        class_count(LABELS, 200_000, None, "y.npy")


@pytest.mark.integration
def test_gtool_shard_refuses_a_class_count_no_store_may_hold(tmp_path: Path) -> None:
    out = tmp_path / "s.zarr"
    args = [
        "shard",
        "grid:4x5",
        "--tiles",
        "2x2",
        "--num-classes",
        str(10**12),
        "-o",
        str(out),
        "-q",
        "-w",
        "1",
    ]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith(
        "error: --num-classes: 1,000,000,000,000 classes, above the limit of 100,000 for a graph of 20 nodes "
        "(the larger of its node count and 100,000: more would be classes no node can have, and the model's "
        "output layer is sized by the count)"
    ), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []
