"""Softmax cross-entropy and accuracy over logits split by rows (a-group) and classes (b-group).

Only labelled nodes of a split count: padded rows and nodes labelled -1 or in no split never do, and
padded class columns never take part in the softmax.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.store.layout import SPLIT_CODES
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer

SPLITS = tuple(SPLIT_CODES)


class BlockTargets:
    """What single- and multi-label targets share: the block's labels, its class columns and the groups
    that split the logits, and the labelled counts of each split over all ranks."""

    def __init__(
        self,
        labels: torch.Tensor,
        classes: int,
        real_classes: int,
        row_group: AxisGroup,
        class_group: AxisGroup,
    ):
        self.labels = labels
        self.classes = classes
        self.real_classes = real_classes
        self.row_group = row_group
        self.class_group = class_group

    def count(self, labelled: dict[str, torch.Tensor], require_train: bool, unit: str) -> None:
        """`counts`: the labelled `unit`s of each split over all ranks; none to train on is an error
        unless a mini-batch may hold none (`require_train` False)."""
        counts = torch.stack([labelled[name].sum() for name in SPLITS]).to(torch.float64)
        self.counts = dict(zip(SPLITS, self.row_group.all_reduce(counts).tolist(), strict=True))
        if self.counts["train"] == 0 and require_train:
            raise GtoolError(f"the store has no labelled training {unit}")


class Targets(BlockTargets):
    """The labels and splits of this rank's logits block, with the groups that split the logits.

    `labels` are global class ids (-1: none) of the block's rows; `classes` is the block's first class and
    `real_classes` how many of its columns are real classes (the rest is padding). A mini-batch may hold
    no training node (`require_train` False): its loss is 0.
    """

    metric = "accuracy"

    def __init__(
        self,
        labels: torch.Tensor,
        split: torch.Tensor,
        classes: int,
        real_classes: int,
        row_group: AxisGroup,
        class_group: AxisGroup,
        require_train: bool = True,
    ):
        if labels.dim() != 1:
            shape = tuple(labels.shape)
            raise GtoolError(f"gtool train needs one class label per node; the store's labels are {shape}")
        super().__init__(labels, classes, real_classes, row_group, class_group)
        labelled = labels >= 0
        self.masks = {name: labelled & (split == code) for name, code in SPLIT_CODES.items()}
        self.count(self.masks, require_train, "node (split code 0)")
        local = labels - classes
        self.local_target = torch.where((local >= 0) & (local < real_classes), local, -1)
        self.target_rows = torch.nonzero(self.local_target >= 0).squeeze(1)
        self.target_columns = self.local_target[self.target_rows]

    def loss(self, logits: torch.Tensor, timer: PhaseTimer) -> torch.Tensor:
        """Mean softmax cross-entropy over the labelled training nodes (the same value on every rank)."""
        return cross_entropy(logits, self, timer)

    def scores(self, logits: torch.Tensor) -> dict[str, float]:
        """Accuracy per split (the same on every rank)."""
        return accuracies(logits, self)

    def masked_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits with padding class columns at -inf."""
        if self.real_classes == logits.shape[1]:
            return logits
        masked = logits.clone()
        masked[:, self.real_classes :] = float("-inf")
        return masked


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets: Targets, timer: PhaseTimer):
        with timer.phase("dense"):
            logits = targets.masked_logits(logits.detach())
            row_max = logits.max(dim=1).values
        targets.class_group.all_reduce(row_max, op=dist.ReduceOp.MAX)
        with timer.phase("dense"):
            exp = torch.exp(logits - row_max.unsqueeze(1))
            sum_exp = exp.sum(dim=1)
            has_target = targets.local_target >= 0
            picked = torch.where(
                has_target, logits.gather(1, targets.local_target.clamp(min=0).unsqueeze(1)).squeeze(1), 0.0
            )
        targets.class_group.all_reduce(sum_exp)
        targets.class_group.all_reduce(picked)
        with timer.phase("dense"):
            weight = targets.masks["train"].to(logits.dtype) / max(1.0, targets.counts["train"])
            log_sum_exp = row_max + torch.log(sum_exp)
            loss = ((log_sum_exp - picked) * weight).sum()
            ctx.save_for_backward(exp / sum_exp.unsqueeze(1), weight)
            ctx.targets, ctx.timer = targets, timer
        return targets.row_group.all_reduce(loss)

    @staticmethod
    def backward(ctx, grad):
        softmax, weight = ctx.saved_tensors
        targets = ctx.targets
        with ctx.timer.phase("dense"):
            softmax[targets.target_rows, targets.target_columns] -= 1.0
            return softmax * (weight * grad).unsqueeze(1), None, None


def cross_entropy(logits: torch.Tensor, targets: Targets, timer: PhaseTimer) -> torch.Tensor:
    """Mean softmax cross-entropy over the labelled training nodes (the same value on every rank)."""
    return _CrossEntropy.apply(logits, targets, timer)


def sampled_epoch_loss(step_losses: list[list[float | None]], train_counts: list[list[float]]) -> float:
    """A mini-batch epoch's loss: the mean cross-entropy over the epoch's labelled training nodes, each
    at the step that sampled it (steps weighted by their training nodes; one without any counts for
    nothing), from every replica's per-round `step_losses` (None: no step) and `train_counts`."""
    pairs = [
        (loss, count)
        for losses, counts in zip(step_losses, train_counts, strict=True)
        for loss, count in zip(losses, counts, strict=True)
        if loss is not None
    ]
    return sum(loss * count for loss, count in pairs) / max(1.0, sum(count for _, count in pairs))


def split_hits(logits: torch.Tensor, targets: Targets) -> torch.Tensor:
    """The correctly predicted labelled nodes of each split (float64[3], over every rank of the row
    group); the prediction is the lowest class id of the row's maximum logit."""
    with torch.no_grad():
        logits = targets.masked_logits(logits)
        local_max, local_arg = logits.max(dim=1)
        row_max = targets.class_group.all_reduce(local_max.clone(), op=dist.ReduceOp.MAX)
        no_class = torch.iinfo(local_arg.dtype).max
        candidate = torch.where(local_max == row_max, local_arg + targets.classes, no_class)
        predicted = targets.class_group.all_reduce(candidate, op=dist.ReduceOp.MIN)
        correct = predicted == targets.labels
        hits = torch.stack([(correct & targets.masks[name]).sum() for name in SPLITS]).to(torch.float64)
        return targets.row_group.all_reduce(hits)


def split_accuracies(hits: list[float], counts: list[float]) -> dict[str, float]:
    """Accuracy per split from its hits and labelled counts (NaN for a split without labelled nodes)."""
    return {
        name: hit / count if count else float("nan")
        for name, hit, count in zip(SPLITS, hits, counts, strict=True)
    }


def accuracies(logits: torch.Tensor, targets: Targets) -> dict[str, float]:
    """Accuracy per split; the prediction is the lowest class id of the row's maximum logit."""
    counts = [targets.counts[name] for name in SPLITS]
    return split_accuracies(split_hits(logits, targets).tolist(), counts)
