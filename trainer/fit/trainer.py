"""One rank's model, targets and optimizer, stepped one epoch (or one mini-batch round) at a time."""

from __future__ import annotations

import math
import time

import torch

from gtool.geometry.grid import ProcessGrid
from gtool.loader import RankData, load_rank
from gtool.store.reader import open_store
from gtool.trainer.comm.groups import CommBytes, GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.optim import build_optimizer
from gtool.trainer.fit.report import EpochRecord
from gtool.trainer.launch.numba_start import kernels_pay, start_numba
from gtool.trainer.minibatch.batch import RankSampler, StepBatch
from gtool.trainer.minibatch.prefetch import Prefetcher, StepKey
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.models.gcn import ParallelGCN
from gtool.trainer.nn.dropout.backends import cpu_kernels
from gtool.trainer.nn.loss import Targets, sampled_epoch_loss
from gtool.trainer.nn.multilabel import MultiLabelTargets


def load_model_rank(
    config: TrainConfig, grid: ProcessGrid, rank: int, device: torch.device | str = "cpu"
) -> RankData:
    """What rank `rank` of `grid` needs for `config`'s model: its layers' orders follow --layer-order."""
    store = open_store(config.store)
    orders = config.model.orders(store.num_features, store.num_classes)
    return load_rank(store, grid=grid, rank=rank, layers=orders, device=device, start=config.model.start)


def logit_targets(
    data: RankData, model: ParallelGCN, comm: GridComm, device: torch.device, rows: torch.Tensor | None = None
) -> Targets | MultiLabelTargets:
    """Labels and splits of the logits block, or of its `rows` (a mini-batch's members): class ids and
    softmax cross-entropy, or on a multi-label store K binary tasks (MultiLabelTargets)."""
    geometry, num_classes = model.geometry, data.meta.num_classes
    rows_band = geometry.output_rows
    if data.label_rows != rows_band or data.labels.shape[0] != rows_band.size:
        raise ValueError(f"rank {comm.rank}: labels cover {data.label_rows}, the logits block is {rows_band}")
    class_band = geometry.output_cols()
    classes = class_band.index * class_band.size
    real_classes = max(0, min(class_band.size, num_classes - classes))
    labels, split = data.labels.to(device), data.split.to(device)
    if rows is not None:
        labels, split = labels[rows], split[rows]
    row_axis, col_axis = geometry.output_axes
    groups = (comm.axes[row_axis], comm.axes[col_axis])
    kind = MultiLabelTargets if data.meta.labels.multi_label else Targets
    return kind(labels, split, classes, real_classes, *groups, require_train=rows is None)


def uses_cpu_kernels(config: TrainConfig, model: ParallelGCN) -> bool:
    """Whether a CPU rank trains with numba's kernels: always with the fused RMSNorm (the torch
    specification sums in another order) and in mini-batches (their cuts are numba's), else when dropout's
    kernels pay for numba's start over the run (gtool.trainer.launch.numba_start)."""
    if config.model.components.norm or config.minibatch.batch_size is not None:
        return True
    return kernels_pay(config.runtime.epochs * model.mask_elements())


class Trainer:
    """The model, targets and optimizer of one rank, stepped one epoch at a time."""

    def __init__(self, data: RankData, comm: GridComm, config: TrainConfig, device: torch.device):
        if data.layers != config.model.layers:
            raise ValueError(
                f"rank data was loaded for {data.layers} layers, the run has {config.model.layers}"
            )
        self.comm = comm
        self.config = config
        self.data = data
        self.device = device
        self.model = ParallelGCN(data, comm, config, device)
        self.cpu_kernels = device.type == "cpu" and uses_cpu_kernels(config, self.model)
        """Whether CPU dropout takes numba's kernels (started now, before the timed epochs)."""
        if self.cpu_kernels:
            start_numba()
        self.targets = logit_targets(data, self.model, comm, device)
        self.optimizer = build_optimizer(self.model.parameters(), config, len(self.model.vectors()))
        self.schedule: Schedule | None = None
        self.batches: Prefetcher | None = None
        if config.minibatch.batch_size is not None:
            self.schedule = Schedule(data.meta.num_nodes, config.minibatch.batch_size, comm.replicas)
            sampler = RankSampler(
                data, config.store, self.schedule, device, config.model.agg_blocks, config.torch_dtype
            )
            self.batches = Prefetcher(sampler, config.runtime.seed, device)

    def step(self, epoch: int) -> torch.Tensor:
        """One forward/backward pass with dropout and one optimizer step; the loss stays on the device
        (nothing in the step waits for the device)."""
        timer = self.comm.timer
        self.optimizer.zero_grad()
        logits = self.model.forward(epoch, training=True)
        loss = self.targets.loss(logits, timer)
        del logits
        loss.backward()
        with timer.phase("dense"):
            self.optimizer.step()
        return loss.detach()

    def batch_step(
        self, epoch: int, batch: StepBatch | None, active: int
    ) -> tuple[torch.Tensor, float] | None:
        """One mini-batch step: forward/backward on `batch` (None: this replica has no step in a short
        last round and adds zero gradients), the gradients averaged over the `active` replicas, one
        optimizer step. Returns the loss, the mean over the batch's labelled training nodes, and how many
        there are (None without a step)."""
        timer = self.comm.timer
        self.optimizer.zero_grad()
        stepped = None
        if batch is not None:
            logits = self.model.forward(epoch, training=True, batch=batch)
            targets = logit_targets(self.data, self.model, self.comm, self.device, batch.target_rows)
            loss = targets.loss(logits, timer)
            del logits
            loss.backward()
            stepped = (loss.detach(), targets.counts["train"])
        self.average_gradients(active)
        with timer.phase("dense"):
            self.optimizer.step()
        return stepped

    def average_gradients(self, active: int) -> None:
        """Each owned parameter part's gradient averaged over the replicas that stepped (one all-reduce
        per part); a replica without a step contributes zeros."""
        if self.comm.data is None:
            return
        for param in self.model.parameters():
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            self.comm.data.all_reduce(param.grad)
            param.grad /= active

    def replica_steps(self, epoch: int) -> list[StepKey | None]:
        """This replica's (epoch, step) in each round of `epoch` (None: no step in that round)."""
        assert self.schedule is not None
        steps = [self.schedule.step_of(r, self.comm.replica) for r in range(self.schedule.rounds)]
        return [None if step is None else (epoch, step) for step in steps]

    def minibatch_epoch(self, epoch: int) -> tuple[torch.Tensor, float, float]:
        """Every round of `epoch`: this replica's step losses and training-node counts (2 x rounds, NaN
        where it had no step), the seconds spent waiting for cuts and the seconds the cuts took."""
        assert self.schedule is not None and self.batches is not None
        steps = self.replica_steps(epoch)
        following = self.replica_steps(epoch + 1)[0] if epoch < self.config.runtime.epochs else None
        upcoming = [key for key in steps if key is not None] + [following]
        losses = torch.full((2, len(steps)), math.nan, dtype=torch.float64, device=self.device)
        self.batches.reset_wait()
        for round_index, key in enumerate(steps):
            batch = None if key is None else self.batches.take(key, upcoming[round_index + 1])
            stepped = self.batch_step(epoch, batch, self.schedule.active(round_index))
            if stepped is not None:
                losses[0, round_index], losses[1, round_index] = stepped
        return losses, self.batches.waited, self.batches.cut_seconds

    def replica_losses(self, losses: torch.Tensor) -> tuple[list[list[float | None]], list[list[float]]]:
        """Every replica's step losses (None where it had no step) and training-node counts, from each
        replica's `losses` (minibatch_epoch's)."""
        gathered = self.comm.everyone.all_gather(losses.flatten()).view(self.comm.everyone.size, 2, -1)
        by_replica = gathered[:: self.comm.grid.size].tolist()
        steps = [[None if math.isnan(value) else value for value in row] for row, _ in by_replica]
        return steps, [[0.0 if math.isnan(value) else value for value in row] for _, row in by_replica]

    def train_epoch(self, epoch: int) -> EpochRecord:
        """`step` (or every mini-batch step of the epoch), then the figures to print: the loss and the
        phase times (one wait for the device)."""
        timer = self.comm.timer
        timer.reset()
        self.comm.sent.reset()
        start = time.perf_counter()
        with cpu_kernels(self.cpu_kernels):
            if self.schedule is None:
                loss = self.step(epoch)
            else:
                loss, waited, cut = self.minibatch_epoch(epoch)
        phases = timer.totals()
        seconds = time.perf_counter() - start
        record = EpochRecord(
            epoch=epoch,
            loss=math.nan,
            seconds=seconds,
            spmm=phases["spmm"],
            dense=phases["dense"],
            comm=phases["comm"],
        )
        record.comm_bytes = self.comm_bytes()  # before the losses of the replicas are gathered
        if self.schedule is None:
            record.loss = float(loss)
        else:
            record.step_losses, counts = self.replica_losses(loss)
            record.sample_wait, record.sample_cut = waited, cut
            record.loss = sampled_epoch_loss(record.step_losses, counts)
        return record

    def comm_bytes(self) -> list[dict[str, dict[str, int]]]:
        """Every rank's collective bytes since the epoch began, by group and kind (gathered from all)."""
        mine = torch.tensor(self.comm.sent.as_list(), dtype=torch.int64, device=self.comm.everyone.device)
        gathered = self.comm.everyone.all_gather(mine).view(self.comm.everyone.size, -1)
        return [CommBytes.from_list(values) for values in gathered.tolist()]

    def close(self) -> None:
        """Stop the background sampling (mini-batch)."""
        if self.batches is not None:
            self.batches.close()

    def logits(self) -> torch.Tensor:
        """This rank's logits block without dropout."""
        with torch.no_grad():
            return self.model.forward(0, training=False)

    @property
    def metric(self) -> str:
        """What `evaluate` measures: accuracy, or rocauc (multi-label)."""
        return self.targets.metric

    def evaluate(self) -> dict[str, float]:
        """The metric on train, valid and test without dropout."""
        return self.targets.scores(self.logits())

    def state(self) -> dict:
        """What a checkpoint keeps of this rank: parameter parts and optimizer state."""
        return {"model": self.model.state(), "optimizer": self.optimizer.state_dict()}

    def load_state(self, state: dict) -> None:
        self.model.load_state(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
