"""Exact ROC-AUC per task, as sklearn's roc_auc_score gives it: tied scores take their average rank.

AUC = (R - P (P + 1) / 2) / (P Q) for a task with P positives and Q negatives, where R is the sum of the
positives' ranks among the task's labelled entries (the Mann-Whitney statistic). Ranks are half-integers
and their sums stay below 2^53, so float64 holds every term exactly.
"""

from __future__ import annotations

import torch

CHUNK_ENTRIES = 1 << 22
"""Entries (rows x tasks) ranked at once: bounds the sort's temporaries on wide label matrices."""


def _chunk_roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    rows, tasks = scores.shape
    order = scores.argsort(dim=0)
    ordered = scores.gather(0, order)
    y = labels.gather(0, order)
    known, positive = y >= 0, y == 1
    starts = torch.ones_like(known)
    starts[1:] = ordered[1:] != ordered[:-1]
    # every (task, run of equal scores) gets one slot: task-major, so that a task's slots are contiguous
    slot = (starts.cumsum(0) - 1) + torch.arange(tasks, device=scores.device) * rows
    slot = slot.flatten()
    known_in_run = torch.zeros(rows * tasks, dtype=torch.float64, device=scores.device)
    known_in_run.scatter_add_(0, slot, known.flatten().to(torch.float64))
    positives_in_run = torch.zeros_like(known_in_run)
    positives_in_run.scatter_add_(0, slot, positive.flatten().to(torch.float64))
    before = (known.cumsum(0) - known.to(torch.int64)).to(torch.float64)
    known_before_run = torch.zeros_like(known_in_run)
    first = starts.flatten()
    known_before_run[slot[first]] = before.flatten()[first]
    average_rank = known_before_run + (known_in_run + 1) / 2
    rank_sum = (average_rank * positives_in_run).view(tasks, rows).sum(dim=1)
    p = positive.sum(dim=0).to(torch.float64)
    q = (known & ~positive).sum(dim=0).to(torch.float64)
    auc = (rank_sum - p * (p + 1) / 2) / (p * q)
    return torch.where((p > 0) & (q > 0), auc, torch.nan)


def task_roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """ROC-AUC of each column of `scores` (N x T) against `labels` (N x T: 1, 0, or -1 = left out),
    float64; NaN for a task without both a positive and a negative."""
    if scores.shape != labels.shape or scores.dim() != 2:
        shapes = f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)}"
        raise ValueError(f"{shapes}: need one N x T shape")
    rows, tasks = scores.shape
    if rows == 0 or tasks == 0:
        return torch.full((tasks,), torch.nan, dtype=torch.float64, device=scores.device)
    step = max(1, CHUNK_ENTRIES // rows)
    parts = [_chunk_roc_auc(scores[:, t : t + step], labels[:, t : t + step]) for t in range(0, tasks, step)]
    return torch.cat(parts)
