"""What one rank of `gtool train` does: join the grid, load its part of the store, train, report."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.trainer.checkpoints.shared import require_shared
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.loop import fit
from gtool.trainer.fit.report import Reporter, Summary
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.joined import join_grid
from gtool.trainer.launch.start import run_layout
from gtool.trainer.nn.dropout import cuda_notice
from gtool.units import counted

SHARED_FOLDER = (
    "Give a folder on a file system that every node mounts at the same path (as an absolute path), or run "
    "the ranks on one node."
)


def run_rank(env: RankEnv, config: TrainConfig) -> Summary:
    """Everything one rank does in a run.

    A rank that fails leaves its process group alone: its error is recorded first, and its peers learn of
    the failure from the connections closing when the process exits.
    """
    device, comm = join_grid(env, config)
    if config.runtime.checkpoint:
        require_shared(comm.everyone, config.runtime.checkpoint, "--checkpoint", SHARED_FOLDER)
    grid = comm.grid
    runtime = config.runtime
    reporter = Reporter(env.rank == 0, runtime.log, append=runtime.resume, quiet=runtime.quiet)
    if device.type == "cuda" and (notice := cuda_notice()):
        reporter.message(notice)
    started = time.perf_counter()
    seat = model_grid(config, comm, device)
    trainer = Trainer(seat, config)
    dist.all_reduce(torch.zeros(1, device=device))
    meta = seat.store.meta
    placed = "" if grid.placement == DEFAULT_PLACEMENT else f" placed {grid.placement}"
    batches = f", mini-batches of {config.minibatch.batch_size} nodes" if config.minibatch.batch_size else ""
    layer_orders = config.model.orders(meta.num_features, meta.num_classes) if config.model.builtin else ()
    first = [str(layer) for layer, transform_first in enumerate(layer_orders) if transform_first]
    orders = f"; A (F W) in layer {', '.join(first)}" if first else ""
    targets = "binary tasks (multi-label)" if meta.labels.multi_label else "classes"
    reporter.message(
        f"gtool train: {meta.num_nodes} nodes, {meta.num_features} features, {meta.num_classes} {targets}; "
        f"grid {run_layout(config)}{placed} ({counted(env.world_size, 'rank')}, {env.launcher}){batches}"
        f"{orders}; loaded in {time.perf_counter() - started:.1f}s"
    )
    try:
        summary = fit(trainer, reporter, device)
    finally:
        trainer.close()
    dist.destroy_process_group()
    return summary
