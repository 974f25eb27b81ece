"""The epochs of a run: resuming, evaluating, checkpointing and reporting each."""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.trainer.checkpoints.files import Checkpoints
from gtool.trainer.checkpoints.folder import run_shape
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.fit.report import METRIC_NAMES, History, Reporter, Summary
from gtool.trainer.fit.trainer import Trainer, evaluates_after


def checkpoint_shape(trainer: Trainer) -> dict:
    """What a checkpoint must agree on with the run resuming it: gtool's models record their widths and
    layer orders, a user's its input and output widths."""
    model, store = trainer.config.model, trainer.grid.store
    features, classes = store.num_features, store.num_classes
    dims = model.widths(features, classes) if model.builtin else [features, trainer.model.output.width]
    layers: dict[str, Any] = {"dims": dims}
    if model.builtin:
        layers["transform_first"] = list(model.orders(features, classes))
    return {**run_shape(trainer.config), **layers, "num_nodes": trainer.grid.num_nodes}


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
    point = checkpoints.resume_point(device)
    if point is None:
        reporter.message(f"no checkpoint in {checkpoints.directory} yet: starting at epoch 1")
        return History(), 1
    manifest, state = point
    if "places" not in state:
        raise GtoolError(
            f"--resume: {manifest['path']} was written by an earlier gtool, whose optimizer state this one "
            "cannot continue; gtool predict still reads it, or train afresh without --resume"
        )
    trainer.load_state(state)
    if manifest["epoch"] >= trainer.config.runtime.epochs:
        reporter.message(
            f"{manifest['path']} is at epoch {manifest['epoch']}, already at --epochs "
            f"{trainer.config.runtime.epochs}: nothing left to train (raise --epochs to continue)"
        )
    else:
        reporter.message(f"resuming from {manifest['path']} at epoch {manifest['epoch'] + 1}")
    return History(**manifest["history"]), manifest["epoch"] + 1


def written(checkpoints: Checkpoints, epoch: int) -> str:
    """Where the checkpoint of `epoch` went, and the best model's copy (what the summary says)."""
    best = checkpoints.best_epoch
    copy = f", best validation epoch {best}" if best is not None else ", no best-validation copy"
    return f"{checkpoints.directory} (latest epoch {epoch}{copy})"


def fit(trainer: Trainer, reporter: Reporter, device: torch.device) -> Summary:
    """Train to the last epoch (--epochs), or until the validation metric reaches --target-accuracy,
    resuming from and writing checkpoints when asked; report each."""
    config = trainer.config
    target = config.runtime.target_accuracy
    history, first_epoch = History(), 1
    checkpoints = None
    if config.runtime.checkpoint:
        checkpoints = Checkpoints(
            config.runtime.checkpoint, trainer.comm, checkpoint_shape(trainer), asdict(config.model)
        )
        if config.runtime.resume:
            history, first_epoch = resume(trainer, checkpoints, reporter, device)
    history.aim(target)
    if history.target_epoch is not None:
        reporter.message(
            f"the target {target:g} was reached at epoch {history.target_epoch}: nothing left to train"
        )
        first_epoch = config.runtime.epochs + 1
    summary = Summary(history, metric=trainer.metric, evaluation=config.minibatch.evaluate)
    if checkpoints is not None and first_epoch > 1:  # resumed: the checkpoint is there, whatever follows
        summary.checkpoint = written(checkpoints, first_epoch - 1)
    best = None
    for epoch in range(first_epoch, config.runtime.epochs + 1):
        record = trainer.train_epoch(epoch)
        if evaluates_after(config, epoch):
            start = time.perf_counter()
            record.set_scores(trainer.metric, trainer.evaluate())
            record.evaluation = config.minibatch.evaluate
            record.eval_seconds = time.perf_counter() - start
        if record.step_losses is not None:  # a mini-batch epoch: its cuts' reads, its evaluation's too
            record.read_bytes, record.read_seconds = trainer.read_figures()
        history.update(record)
        if checkpoints is not None and history.best_epoch == epoch:
            best = (epoch, trainer.model_copy())
        summary.epochs.append(record)
        reporter.epoch(record)
        if not math.isfinite(record.loss):  # the same on every rank: all stop, before checkpointing it
            raise GtoolError(
                f"the loss is {record.loss} at epoch {epoch}: training diverged (try a lower --lr); "
                "no checkpoint of this or later epochs was written"
            )
        reached = (
            record.scores is not None and target is not None and agree_on_target(trainer, history, epoch)
        )
        if checkpoints is not None and (
            epoch % config.runtime.checkpoint_every == 0 or epoch == config.runtime.epochs or reached
        ):
            checkpoints.save(epoch, trainer.state(), asdict(history), best)
            summary.checkpoint = written(checkpoints, epoch)
        if reached:
            name = METRIC_NAMES[summary.metric]
            reporter.message(f"validation {name} reached the target {target:g} at epoch {epoch}: stopping")
            break
    summary.peak_memory_mb = peak_memory(trainer.comm, device)
    reporter.summary(summary)
    return summary


def agree_on_target(trainer: Trainer, history: History, epoch: int) -> bool:
    """Whether the target was reached at `epoch` on any rank; every rank's `history` then records it (a
    rank's ROC-AUC may differ from another's in the last bit, and all must stop at the same epoch)."""
    flag = torch.tensor([float(history.target_epoch == epoch)], device=trainer.comm.everyone.device)
    reached = bool(trainer.comm.everyone.all_reduce(flag, op=dist.ReduceOp.MAX).item())
    if reached and history.target_epoch is None:
        history.target_epoch, history.target_seconds = epoch, history.train_seconds
    return reached
