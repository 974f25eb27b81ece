"""One rank's model, targets and optimizer, stepped one epoch (or one mini-batch round) at a time."""

from __future__ import annotations

import math
import time

import torch

from gtool.errors import GtoolError
from gtool.loader import load_rank
from gtool.store.reader import open_store
from gtool.trainer.comm.groups import CommBytes, GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.optim import build_optimizer
from gtool.trainer.fit.report import EpochRecord
from gtool.trainer.launch.numba_start import kernels_pay, start_numba
from gtool.trainer.minibatch.batch import RankSampler, StepBatch
from gtool.trainer.minibatch.prefetch import Prefetcher, StepKey
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.models.grid import Grid, Step
from gtool.trainer.models.network import (
    Network,
    build_network,
    decay_groups,
    has_norm,
    mask_elements,
)
from gtool.trainer.models.state import load_model_state, model_state
from gtool.trainer.nn.dropout.backends import cpu_kernels
from gtool.trainer.nn.loss import SPLITS, Targets, sampled_epoch_loss, split_accuracies, split_hits

EVAL_EPOCH = 0
"""The schedule's epoch whose steps a sampled evaluation takes (training epochs count from 1)."""


def evaluates_after(config: TrainConfig, epoch: int) -> bool:
    """Whether `epoch` ends with an evaluation: every --eval-every epochs and after the last."""
    return epoch % config.runtime.eval_every == 0 or epoch == config.runtime.epochs


def model_grid(config: TrainConfig, comm: GridComm, device: torch.device | str = "cpu") -> Grid:
    """This rank's seat for `config`'s model, its store opened once: for gtool's models, everything their
    layers multiply by and take read in one pass (`load_rank`: no feature block when each step reads its
    rows, no shard transposes in mini-batches, whose cuts make their own); a user's model's blocks read
    theirs as they are built."""
    store = open_store(config.store)
    model, minibatch = config.model, config.minibatch
    data = None
    if model.builtin:
        orders = model.orders(store.num_features, store.num_classes)
        data = load_rank(
            store,
            grid=comm.grid,
            rank=comm.rank,
            layers=orders,
            device=device,
            start=model.start,
            features=minibatch.features_from != "store",
            transposes=minibatch.batch_size is None,
        )
    dtype, seed = config.torch_dtype, config.runtime.seed
    return Grid(comm, store, dtype, torch.device(device), seed, data, model, minibatch.features_from)


def uses_cpu_kernels(config: TrainConfig, network: Network) -> bool:
    """Whether a CPU rank trains with numba's kernels: always with the fused RMSNorm (the torch
    specification sums in another order) and in mini-batches (their cuts are numba's), else when dropout's
    kernels pay for numba's start over the run (gtool.trainer.launch.numba_start)."""
    if has_norm(network) or config.minibatch.batch_size is not None:
        return True
    return kernels_pay(config.runtime.epochs * mask_elements(network))


class Trainer:
    """The model, targets and optimizer of one rank, stepped one epoch at a time."""

    def __init__(self, grid: Grid, config: TrainConfig, network: Network | None = None):
        self.grid = grid
        self.comm = grid.comm
        self.config = config
        self.device = grid.device
        self.model = build_network(grid, config.model) if network is None else network
        self.cpu_kernels = self.device.type == "cpu" and uses_cpu_kernels(config, self.model)
        """Whether CPU dropout takes numba's kernels (started now, before the timed epochs)."""
        if self.cpu_kernels:
            start_numba()
        targets = grid.targets(self.model.output)  # checks that the store has training labels
        self.metric = targets.metric
        """What `evaluate` measures: accuracy, or rocauc (multi-label)."""
        sampled = config.minibatch.batch_size is not None and config.minibatch.evaluate == "sampled"
        self.targets = None if sampled else targets
        """The full graph's targets (None where no full-graph pass runs: their N-sized masks let go)."""
        if problem := config.minibatch.evaluation_problem(self.metric != "accuracy"):
            raise GtoolError(problem)
        self.optimizer = build_optimizer(decay_groups(self.model), config)
        self.schedule: Schedule | None = None
        self.read_mark = (0, 0.0)
        """The cuts' feature reads (bytes, seconds) counted in an epoch's record so far."""
        self.following: StepKey | None = None
        """The training step cut after the current epoch's last one (an evaluation's cuts go before it)."""
        self.batches: Prefetcher | None = None
        if config.minibatch.batch_size is not None:
            self.logit_rows = grid.needs_rows(self.model.output)
            batch, sampling = config.minibatch.batch_size, config.minibatch.sampling
            self.schedule = Schedule.of(grid.store, batch, self.comm.replicas, sampling)
            self.batches = Prefetcher(RankSampler(grid, self.schedule), config.runtime.seed, self.device)

    def step(self, epoch: int) -> torch.Tensor:
        """One forward/backward pass with dropout and one optimizer step; the loss stays on the device
        (nothing in the step waits for the device)."""
        timer = self.comm.timer
        self.optimizer.zero_grad()
        self.grid.begin(Step(epoch))
        self.model.train()
        logits = self.model()
        assert self.targets is not None
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
            self.begin(epoch, batch)
            self.model.train()
            logits = self.model()
            rows = self.grid.members(self.logit_rows).positions
            targets = self.grid.targets(self.model.output, rows)
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
        for param in self.optimizer.params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            self.comm.data.all_reduce(param.grad)
            param.grad /= active

    def take(self, key: StepKey, following: StepKey | None) -> StepBatch:
        """The cut of step `key`, then `following`'s started; the grid lets the previous step's cut go
        first, so that a rank holds two cuts (this step's and the next one's), not three."""
        assert self.batches is not None
        self.grid.begin(Step(self.grid.epoch))
        return self.batches.take(key, following)

    def begin(self, epoch: int, batch: StepBatch) -> None:
        """Run the blocks in `batch`'s step next, its streamed feature rows handed to the grid (the
        batch lets them go: the input block holds them only as long as it needs them)."""
        rows, batch.features = batch.features, None
        self.grid.begin(Step(epoch, batch.sample), rows)

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
        self.following = following
        if evaluates_after(self.config, epoch) and self.config.minibatch.evaluate == "sampled":
            following = next((key for key in self.replica_steps(EVAL_EPOCH) if key is not None), following)
        upcoming = [key for key in steps if key is not None] + [following]
        losses = torch.full((2, len(steps)), math.nan, dtype=torch.float64, device=self.device)
        self.batches.reset_wait()
        for round_index, key in enumerate(steps):
            batch = None  # let the previous cut go before the next is taken and the one after started
            batch = None if key is None else self.take(key, upcoming[round_index + 1])
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
            reshard=phases["reshard"],
            other=phases["other"],
        )
        record.comm_bytes = self.comm_bytes()  # before the losses of the replicas are gathered
        if self.schedule is None:
            record.loss = float(loss)
        else:
            record.step_losses, counts = self.replica_losses(loss)
            record.sample_wait, record.sample_cut = waited, cut
            record.loss = sampled_epoch_loss(record.step_losses, counts)
        return record

    def read_figures(self) -> tuple[int, float]:
        """The feature bytes the cuts read from the store since the last call (an epoch and its evaluation,
        with the next one's first cut), summed over every rank, and the longest seconds a rank's reads
        took."""
        assert self.batches is not None
        read, (bytes_before, seconds_before) = self.batches.sampler.read, self.read_mark
        self.read_mark = (read.bytes, read.seconds)
        mine = torch.tensor(
            [float(read.bytes - bytes_before), read.seconds - seconds_before], dtype=torch.float64
        )
        gathered = self.comm.everyone.all_gather(mine.to(self.comm.everyone.device)).view(-1, 2).cpu()
        return int(gathered[:, 0].sum()), float(gathered[:, 1].max())

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
        self.grid.begin(Step())
        self.model.eval()
        with torch.no_grad():
            return self.model()

    def evaluate(self) -> dict[str, float]:
        """The metric on train, valid and test without dropout: of the full-graph forward, or summed over
        sampled batches (--eval)."""
        if self.config.minibatch.evaluate == "sampled":
            return self.sampled_scores()
        assert self.targets is not None
        return self.targets.scores(self.logits())

    def sampled_scores(self) -> dict[str, float]:
        """Accuracy per split over the steps of the schedule's epoch EVAL_EPOCH (the same batches at every
        evaluation; every node once over all replicas), without dropout: each batch's hits and labelled
        counts summed over the batches and replicas. The cuts are prefetched as in training."""
        assert self.schedule is not None and self.batches is not None
        steps = [key for key in self.replica_steps(EVAL_EPOCH) if key is not None]
        totals = torch.zeros(2, len(SPLITS), dtype=torch.float64, device=self.device)
        self.model.eval()
        with torch.no_grad(), cpu_kernels(self.cpu_kernels):
            for key, following in zip(steps, [*steps[1:], self.following], strict=True):
                batch = logits = None  # as in minibatch_epoch
                batch = self.take(key, following)
                self.begin(EVAL_EPOCH, batch)
                logits = self.model()
                targets = self.grid.targets(self.model.output, self.grid.members(self.logit_rows).positions)
                assert isinstance(targets, Targets)  # refused at start otherwise
                totals[0] += split_hits(logits, targets)
                totals[1] += torch.tensor([targets.counts[name] for name in SPLITS], dtype=torch.float64)
        if self.comm.data is not None:
            self.comm.data.all_reduce(totals)
        hits, counts = totals.tolist()
        return split_accuracies(hits, counts)

    def state(self) -> dict:
        """What a checkpoint keeps of this rank: parameter parts, their places, and optimizer state."""
        return {**model_state(self.model), "optimizer": self.optimizer.state_dict()}

    def model_copy(self) -> dict:
        """This rank's parameter parts as they are now, copied to the CPU, and their places (the best
        model's, till a checkpoint writes them)."""
        state = model_state(self.model)
        return {**state, "model": {name: part.to("cpu", copy=True) for name, part in state["model"].items()}}

    def load_state(self, state: dict) -> None:
        load_model_state(self.model, state)
        self.optimizer.load_state_dict(state["optimizer"])
