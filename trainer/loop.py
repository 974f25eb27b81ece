"""Training epochs of one rank: the step, the evaluation, and the run with checkpoints and reports."""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict

import torch

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.loader import load_rank
from gtool.loader.rank_data import RankData
from gtool.store.reader import open_store
from gtool.trainer.checkpoint import Checkpoints
from gtool.trainer.config import TrainConfig
from gtool.trainer.distributed import CommBytes, GridComm
from gtool.trainer.loss import Targets, accuracies, cross_entropy, sampled_epoch_loss
from gtool.trainer.minibatch.batch import RankSampler, StepBatch
from gtool.trainer.minibatch.prefetch import Prefetcher, StepKey
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.model import ParallelGCN
from gtool.trainer.optim import build_optimizer
from gtool.trainer.report import EpochRecord, History, Reporter, Summary


def load_model_rank(
    config: TrainConfig, grid: ProcessGrid, rank: int, device: torch.device | str = "cpu"
) -> RankData:
    """What rank `rank` of `grid` needs for `config`'s model: its layers' orders follow --layer-order."""
    store = open_store(config.store)
    orders = config.model.orders(store.num_features, store.num_classes)
    return load_rank(store, grid=grid, rank=rank, layers=orders, device=device)


def logit_targets(
    data: RankData, model: ParallelGCN, comm: GridComm, device: torch.device, rows: torch.Tensor | None = None
) -> Targets:
    """Labels and splits of the last layer's output block, or of its `rows` (a mini-batch's members)."""
    last, num_classes = model.layers[-1], model.dims[-1]
    if data.label_rows != last.rows or data.labels.shape[0] != last.rows.size:
        raise ValueError(f"rank {comm.rank}: labels cover {data.label_rows}, the logits block is {last.rows}")
    class_band = last.out_cols(num_classes)
    classes = class_band.index * class_band.size
    real_classes = max(0, min(class_band.size, num_classes - classes))
    labels, split = data.labels.to(device), data.split.to(device)
    if rows is not None:
        labels, split = labels[rows], split[rows]
    groups = (comm.axes[last.row_axis], comm.axes[last.out_col_axis])
    return Targets(labels, split, classes, real_classes, *groups, require_train=rows is None)


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
        self.targets = logit_targets(data, self.model, comm, device)
        self.optimizer = build_optimizer(self.model.parameters(), config)
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
        loss = cross_entropy(logits, self.targets, timer)
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
            loss = cross_entropy(logits, targets, timer)
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

    def evaluate(self) -> dict[str, float]:
        """Accuracy on train, valid and test without dropout."""
        return accuracies(self.logits(), self.targets)

    def state(self) -> dict:
        """What a checkpoint keeps of this rank: parameter parts and optimizer state."""
        return {"model": self.model.state(), "optimizer": self.optimizer.state_dict()}

    def load_state(self, state: dict) -> None:
        self.model.load_state(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])


def checkpoint_shape(trainer: Trainer) -> dict:
    """What a checkpoint must agree on with the run resuming it."""
    model = trainer.model
    layers = {"transform_first": [layer.transform_first for layer in model.layers], "dims": model.dims}
    return {**run_shape(trainer.config), **layers, "num_nodes": model.num_nodes}


def run_shape(config: TrainConfig) -> dict:
    """The part of checkpoint_shape that the options and the store's metadata give (checked before any rank
    starts). Learned features are saved by position: with them, the store's node order too."""
    shape = {
        "grid": list(config.grid),
        "placement": config.process_grid.placement,
        "dtype": config.model.dtype,
        "optimizer": config.optimizer.algorithm,
        "learnable_features": config.model.learnable_features,
        "batch_size": config.minibatch.batch_size,
        "data_parallel": config.minibatch.data_parallel,
    }
    if config.model.learnable_features:
        shape["node_order"] = open_store(config.store).meta.node_order
    return shape


def peak_memory(comm: GridComm, device: torch.device) -> list[dict[str, float]]:
    """Peak resident memory (and GPU memory) of every rank, in MB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    gathered = comm.everyone.all_gather(torch.tensor([rss, gpu], dtype=torch.float64, device=device))
    return [{"rss": float(r), "gpu": float(g)} for r, g in gathered.view(-1, 2).tolist()]


def resume(
    trainer: Trainer, checkpoints: Checkpoints, reporter: Reporter, device: torch.device
) -> tuple[History, int]:
    """Load the latest checkpoint into `trainer`: the history so far and the epoch to continue at."""
    manifest = checkpoints.latest()
    if manifest is None:
        reporter.message(f"no checkpoint in {checkpoints.directory} yet: starting at epoch 1")
        return History(), 1
    trainer.load_state(checkpoints.load(manifest, device))
    if manifest["epoch"] >= trainer.config.runtime.epochs:
        reporter.message(
            f"{manifest['path']} is at epoch {manifest['epoch']}, already at --epochs "
            f"{trainer.config.runtime.epochs}: nothing left to train (raise --epochs to continue)"
        )
    else:
        reporter.message(f"resuming from {manifest['path']} at epoch {manifest['epoch'] + 1}")
    return History(**manifest["history"]), manifest["epoch"] + 1


def fit(trainer: Trainer, reporter: Reporter, device: torch.device) -> Summary:
    """Train to the last epoch (--epochs), resuming from and writing checkpoints when asked; report each."""
    config = trainer.config
    history, first_epoch = History(), 1
    checkpoints = None
    if config.runtime.checkpoint:
        checkpoints = Checkpoints(
            config.runtime.checkpoint, trainer.comm, checkpoint_shape(trainer), asdict(config.model)
        )
        if config.runtime.resume:
            history, first_epoch = resume(trainer, checkpoints, reporter, device)
    summary = Summary(history)
    for epoch in range(first_epoch, config.runtime.epochs + 1):
        record = trainer.train_epoch(epoch)
        if epoch % config.runtime.eval_every == 0 or epoch == config.runtime.epochs:
            start = time.perf_counter()
            record.accuracy = trainer.evaluate()
            record.eval_seconds = time.perf_counter() - start
        history.update(record)
        summary.epochs.append(record)
        reporter.epoch(record)
        if not math.isfinite(record.loss):  # the same on every rank: all stop, before checkpointing it
            raise GtoolError(
                f"the loss is {record.loss} at epoch {epoch}: training diverged (try a lower --lr); "
                "no checkpoint of this or later epochs was written"
            )
        if checkpoints is not None and (
            epoch % config.runtime.checkpoint_every == 0 or epoch == config.runtime.epochs
        ):
            checkpoints.save(epoch, trainer.state(), asdict(history))
    summary.peak_memory_mb = peak_memory(trainer.comm, device)
    reporter.summary(summary)
    return summary
