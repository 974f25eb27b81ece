"""ROC-AUC per task equals the pairwise definition (a positive above a negative counts 1, a tie 1/2) on
random scores with many ties and unknown labels."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from gtool.trainer.nn import rocauc
from gtool.trainer.nn.rocauc import task_roc_auc


def pairwise_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of (positive, negative) pairs ordered right, ties counting 1/2 (nan without pairs)."""
    positives, negatives = scores[labels == 1], scores[labels == 0]
    if not len(positives) or not len(negatives):
        return float("nan")
    pairs = [1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(positives, negatives)]
    return sum(pairs) / len(pairs)


def test_task_roc_auc_equals_the_pairwise_definition_with_ties_and_unknown_labels(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    rows, tasks = 97, 9
    scores = rng.integers(0, 6, (rows, tasks)).astype(np.float32) / 4  # few distinct values: many ties
    scores[:, 1] = rng.normal(size=rows)  # no ties
    labels = rng.integers(0, 2, (rows, tasks))
    labels[rng.random((rows, tasks)) < 0.2] = -1
    labels[:, 2] = np.where(labels[:, 2] == 0, -1, labels[:, 2])  # no negatives: nan
    labels[:, 3] = 0  # no positives: nan
    want = [pairwise_auc(scores[:, t], labels[:, t]) for t in range(tasks)]
    for chunk in (1 << 22, rows * 2):  # all tasks at once, and two tasks at a time
        monkeypatch.setattr(rocauc, "CHUNK_ENTRIES", chunk)
        got = task_roc_auc(torch.from_numpy(scores), torch.from_numpy(labels)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        assert np.isnan(got[2]) and np.isnan(got[3])


def test_task_roc_auc_of_perfect_and_reversed_scores() -> None:
    labels = torch.tensor([[0, 1], [0, 1], [1, 0], [1, 0], [-1, -1]])
    scores = torch.tensor([[0.1, 0.1], [0.2, 0.2], [0.3, 0.3], [0.9, 0.9], [-5.0, 7.0]])
    assert task_roc_auc(scores, labels).tolist() == [1.0, 0.0]
