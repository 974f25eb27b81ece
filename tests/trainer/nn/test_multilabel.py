"""Multi-label targets on one rank: the loss and its gradient are torch's binary cross-entropy with logits
over the labelled training entries, padded task columns and unknown entries left out; the metric is the
mean over tasks (with both classes in the split) of each task's ROC-AUC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gtool.errors import GtoolError
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.multilabel import MultiLabelTargets
from gtool.trainer.nn.rocauc import task_roc_auc
from tests.trainer.cases import CPU, single_rank_comm

ROWS, TASKS, WIDTH = 53, 5, 7  # 2 padded task columns


def targets(seed: int = 0) -> MultiLabelTargets:
    rng = np.random.default_rng(seed)
    labels = torch.from_numpy(rng.integers(-1, 2, (ROWS, TASKS)))
    split = torch.from_numpy(rng.integers(-1, 3, ROWS))
    comm = single_rank_comm()
    return MultiLabelTargets(labels, split, 0, TASKS, comm.axes[0], comm.axes[1])


def test_loss_and_gradient_are_the_masked_mean_binary_cross_entropy() -> None:
    target = targets()
    logits = torch.randn(ROWS, WIDTH, dtype=torch.float64, requires_grad=True)
    target.loss(logits, PhaseTimer(CPU)).backward()
    reference = logits.detach().clone().requires_grad_()
    train = (target.split == 0).unsqueeze(1) & (target.labels >= 0)
    entries = torch.nn.functional.binary_cross_entropy_with_logits(
        reference[:, :TASKS], target.labels.clamp(min=0).to(torch.float64), reduction="none"
    )
    want = entries[train].mean()
    want.backward()
    assert target.counts["train"] == train.sum()
    torch.testing.assert_close(target.loss(logits, PhaseTimer(CPU)), want.detach(), rtol=1e-12, atol=0)
    torch.testing.assert_close(logits.grad, reference.grad, rtol=1e-12, atol=1e-15)
    assert not logits.grad[:, TASKS:].any()


def test_scores_are_the_mean_task_roc_auc_of_each_split() -> None:
    target = targets(1)
    logits = torch.randn(ROWS, WIDTH)
    got = target.scores(logits)
    for code, name in enumerate(("train", "valid", "test")):
        labels = torch.where((target.split == code).unsqueeze(1), target.labels, -1)
        per_task = task_roc_auc(logits[:, :TASKS], labels)
        assert got[name] == pytest.approx(float(per_task[~per_task.isnan()].mean()), rel=1e-12)


def test_a_split_without_a_task_of_both_classes_scores_nan() -> None:
    comm = single_rank_comm()
    labels = torch.tensor([[1, 0], [1, 0], [0, 1]])
    split = torch.tensor([0, 1, 0])  # valid: one node, so one class per task
    target = MultiLabelTargets(labels, split, 0, 2, comm.axes[0], comm.axes[1])
    scores = target.scores(torch.tensor([[0.3, 0.1], [0.2, 0.2], [0.1, 0.9]]))
    assert scores["train"] == 1.0 and math.isnan(scores["valid"]) and math.isnan(scores["test"])


def test_labels_without_a_training_entry_are_refused() -> None:
    comm = single_rank_comm()
    labels = torch.tensor([[-1, -1], [1, 0]])
    with pytest.raises(GtoolError, match="no labelled training entry"):
        MultiLabelTargets(labels, torch.tensor([0, 1]), 0, 2, comm.axes[0], comm.axes[1])
