"""Exact ROC-AUC per task, as sklearn's roc_auc_score gives it: tied scores take their average rank.

AUC = (R - P (P + 1) / 2) / (P Q) for a task with P positives and Q negatives, where R is the sum of the
positives' ranks among the task's labelled entries (the Mann-Whitney statistic). A run of tied scores
holding the labelled ranks b+1 .. e has the average rank (b + e + 1) / 2; twice it is an integer, so R is
summed exactly in int64. Each task's scores are sorted once for every label set (split) given.
"""

from __future__ import annotations

import torch

CHUNK_ENTRIES = 1 << 20
"""Entries (rows x tasks) ranked at once: bounds the temporaries on wide label matrices."""


def _chunk_roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """scores N x T, labels S x N x T: S x T."""
    rows = scores.shape[0]
    values, order = scores.t().sort(dim=1)
    y = labels.transpose(1, 2).gather(2, order.expand(labels.shape[0], -1, -1))
    starts = torch.ones_like(values, dtype=torch.bool)
    starts[:, 1:] = values[:, 1:] != values[:, :-1]
    ends = torch.ones_like(starts)
    ends[:, :-1] = starts[:, 1:]
    known, positive = y >= 0, y == 1
    count = known.cumsum(2)
    before = torch.where(starts, count - known.to(count.dtype), 0).cummax(2).values
    through = torch.where(ends, count, rows).flip(2).cummin(2).values.flip(2)
    twice_rank_sum = ((before + through + 1) * positive).sum(2)
    p = positive.sum(2).to(torch.float64)
    q = known.sum(2).to(torch.float64) - p
    auc = (twice_rank_sum.to(torch.float64) / 2 - p * (p + 1) / 2) / (p * q)
    return torch.where((p > 0) & (q > 0), auc, torch.nan)


def task_roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """ROC-AUC of each column of `scores` (N x T) against `labels` (N x T, or S x N x T for S label sets
    such as splits: 1, 0, or -1 = left out); float64, T (or S x T); NaN for a task without both a
    positive and a negative."""
    single = labels.dim() == 2
    sets = labels.unsqueeze(0) if single else labels
    if scores.dim() != 2 or sets.dim() != 3 or sets.shape[1:] != scores.shape:
        shapes = f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)}"
        raise ValueError(f"{shapes}: need N x T scores and N x T (or S x N x T) labels")
    rows, tasks = scores.shape
    if rows == 0 or tasks == 0:
        auc = torch.full((sets.shape[0], tasks), torch.nan, dtype=torch.float64, device=scores.device)
    else:
        step = max(1, CHUNK_ENTRIES // (rows * sets.shape[0]))
        parts = [
            _chunk_roc_auc(scores[:, t : t + step], sets[:, :, t : t + step]) for t in range(0, tasks, step)
        ]
        auc = torch.cat(parts, dim=1)
    return auc[0] if single else auc
