"""Multi-label targets: binary cross-entropy with logits, and ROC-AUC per task averaged over the tasks.

The logits block holds rows of the row band (a-group) and tasks of the class band (b-group); every rank
holds its rows' labels for all K tasks (1, 0, or -1 = unknown). Only labelled entries of a split count:
unknown entries, padded rows and padded task columns never do. The metric is OGB's for ogbn-proteins:
per split, the mean over the tasks that have both a positive and a negative there of the task's ROC-AUC.
"""

from __future__ import annotations

import torch

from gtool.errors import GtoolError
from gtool.store.layout import SPLIT_CODES
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.loss import SPLITS, BlockTargets
from gtool.trainer.nn.rocauc import task_roc_auc


class MultiLabelTargets(BlockTargets):
    """The labels (rows x K) and splits of this rank's logits block, with the groups that split the logits.

    `classes` is the block's first task and `real_classes` how many of its columns are real tasks (the
    rest is padding). `counts` are the labelled entries of each split over all ranks; a mini-batch may
    hold no training entry (`require_train` False): its loss is 0.
    """

    metric = "rocauc"

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
        if labels.dim() != 2:
            shape = tuple(labels.shape)
            raise GtoolError(f"multi-label training needs N x K labels; the store's labels are {shape}")
        super().__init__(labels, classes, real_classes, row_group, class_group)
        self.split = split
        labelled = labels >= 0
        rows = {name: split == code for name, code in SPLIT_CODES.items()}
        entries = {name: labelled & rows[name].unsqueeze(1) for name in SPLITS}
        self.count(entries, require_train, "entry (split code 0, label 0 or 1)")
        block = labels[:, classes : classes + real_classes]
        self.block_labels = block.clamp(min=0)
        self.train_entries = (block >= 0) & rows["train"].unsqueeze(1)

    def loss(self, logits: torch.Tensor, timer: PhaseTimer) -> torch.Tensor:
        """Mean binary cross-entropy over the labelled training entries (the same value on every rank)."""
        return _BinaryCrossEntropy.apply(logits, self, timer)

    def scores(self, logits: torch.Tensor) -> dict[str, float]:
        """ROC-AUC per split (nan where no task has both classes), the same on every rank."""
        return roc_auc(logits, self)

    def split_codes(self) -> torch.Tensor:
        """The block's entries as int8: label + 2 x split code for labelled entries in a split, else -1."""
        block = self.labels[:, self.classes : self.classes + self.real_classes]
        in_split = (block >= 0) & (self.split >= 0).unsqueeze(1)
        return torch.where(in_split, block + 2 * self.split.unsqueeze(1), -1).to(torch.int8)


class _BinaryCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets: MultiLabelTargets, timer: PhaseTimer):
        real = targets.real_classes
        with timer.phase("dense"):
            x = logits.detach()[:, :real]
            y = targets.block_labels.to(x.dtype)
            weight = targets.train_entries.to(x.dtype) / max(1.0, targets.counts["train"])
            entries = x.clamp(min=0) - x * y + torch.log1p(torch.exp(-x.abs()))
            loss = (entries * weight).sum()
            grad = torch.zeros_like(logits)
            grad[:, :real] = (torch.sigmoid(x) - y) * weight
            ctx.save_for_backward(grad)
            ctx.timer = timer
        targets.class_group.all_reduce(loss)
        return targets.row_group.all_reduce(loss)

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        with ctx.timer.phase("dense"):
            return grad * grad_output, None, None


def roc_auc(logits: torch.Tensor, targets: MultiLabelTargets) -> dict[str, float]:
    """ROC-AUC per split, exact and the same bits on every rank: the a-group gathers its blocks' rows (each
    rank then holds every node's scores of its class band), each rank of it ranks every G_a-th task of the
    band, the a-group adds up the tasks' AUCs (each task's comes from one rank, the others add zeros) and
    the b-group gathers them, so that every rank averages every task's AUC in the same order."""
    group = targets.row_group
    with torch.no_grad():
        real, width = targets.real_classes, logits.shape[1]
        rows = group.size * logits.shape[0]  # every rank of the group holds a band of the same height
        scores = group.all_gather(logits[:, :real].contiguous().flatten()).view(rows, real)
        codes = group.all_gather(targets.split_codes().flatten()).view(rows, real)
        mine = torch.arange(group.index, real, group.size, device=scores.device)
        split_of, label = codes[:, mine].div(2, rounding_mode="floor"), codes[:, mine].remainder(2)
        labels = torch.stack([torch.where(split_of == code, label, -1) for code in SPLIT_CODES.values()])
        auc = task_roc_auc(scores[:, mine], labels)
        band = torch.zeros(2, len(SPLITS), width, dtype=torch.float64, device=scores.device)
        band[0][:, mine] = torch.nan_to_num(auc, nan=0.0)
        band[1][:, mine] = (~auc.isnan()).to(torch.float64)
        group.all_reduce(band)
        every = targets.class_group.all_gather(band.flatten()).view(-1, 2, len(SPLITS), width)
        sums, tasks = every[:, 0].sum(dim=(0, 2)).tolist(), every[:, 1].sum(dim=(0, 2)).tolist()
    return {name: s / t if t else float("nan") for name, s, t in zip(SPLITS, sums, tasks, strict=True)}
