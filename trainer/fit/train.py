"""`gtool train`: the run's files prepared, then each rank loads its part of the store and trains."""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.store.writing.output_lock import output_lock
from gtool.store.writing.staging import absolute_location, check_output_file, make_folder, refuse_inside_store
from gtool.trainer.checkpoints.files import claim_folder, latest_manifest, refuse_other_shape
from gtool.trainer.checkpoints.shared import require_shared
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.loop import fit, run_shape
from gtool.trainer.fit.report import Reporter, Summary
from gtool.trainer.fit.trainer import Trainer, load_model_rank
from gtool.trainer.launch.environment import RankEnv, environment_rank
from gtool.trainer.launch.start import join_grid, run_layout, start_ranks
from gtool.trainer.nn.dropout import cuda_notice


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
    data = load_model_rank(config, grid, comm.rank, device)
    dist.all_reduce(torch.zeros(1, device=device))
    meta = data.meta
    placed = "" if grid.placement == DEFAULT_PLACEMENT else f" placed {grid.placement}"
    batches = f", mini-batches of {config.minibatch.batch_size} nodes" if config.minibatch.batch_size else ""
    first = [str(layer) for layer, transform_first in enumerate(data.orders) if transform_first]
    orders = f"; A (F W) in layer {', '.join(first)}" if first else ""
    targets = "binary tasks (multi-label)" if meta.labels.multi_label else "classes"
    reporter.message(
        f"gtool train: {meta.num_nodes} nodes, {meta.num_features} features, {meta.num_classes} {targets}; "
        f"grid {run_layout(config)}{placed} ({env.world_size} ranks, {env.launcher}){batches}"
        f"{orders}; loaded in {time.perf_counter() - started:.1f}s"
    )
    trainer = Trainer(data, comm, config, device)
    try:
        summary = fit(trainer, reporter, device)
    finally:
        trainer.close()
    dist.destroy_process_group()
    return summary


def train(config: TrainConfig) -> None:
    """Run `config` on the ranks of torchrun/srun when started by one, else on local processes (a
    one-rank grid runs in this process: a second one would only add its memory).

    Raises RankFailed (gtool.trainer.launch) naming the rank that failed first and its error.
    """
    config = with_absolute_paths(config)
    refuse_files_in_store(config)
    env = environment_rank()
    writer = env is None or env.rank == 0
    checkpoint = config.runtime.checkpoint
    with output_lock(checkpoint, "gtool train") if writer and checkpoint else nullcontext():
        prepare_run_files(config, writer)
        start_ranks(config, "train", run_rank, config)


def with_absolute_paths(config: TrainConfig) -> TrainConfig:
    """`config` with its store, --checkpoint and --log resolved once, here, as absolute paths (URLs kept)."""
    runtime = config.runtime
    paths = {"checkpoint": runtime.checkpoint, "log": runtime.log}
    given = {name: absolute_location(path) for name, path in paths.items() if path}
    return config.replace(store=absolute_location(config.store), **given)


def refuse_files_in_store(config: TrainConfig) -> None:
    """A --checkpoint or --log that is the store or lies inside it is refused before anything is written:
    the run's files would change the store (files zarr does not know, or a removed epoch folder)."""
    for flag, path in (("--checkpoint", config.runtime.checkpoint), ("--log", config.runtime.log)):
        if path:
            refuse_inside_store(flag, path, config.store)


SHARED_FOLDER = (
    "Give a folder on a file system that every node mounts at the same path (as an absolute path), or run "
    "the ranks on one node."
)


def prepare_run_files(config: TrainConfig, writer: bool = True) -> None:
    """The folders of --checkpoint and --log, made before any rank starts: a file in their way, a --log
    that is a folder or cannot be written (a read-only device), is an error naming it. The `writer` (the
    launching process, or rank 0 of torchrun's: it holds the checkpoint folder's lock) claims the folder:
    another run's checkpoint there is refused without --resume or --overwrite. With --resume, a latest
    checkpoint of another grid, batch size, replicas, dtype, ... is refused before a rank loads the store."""
    if config.runtime.checkpoint:
        make_folder(Path(config.runtime.checkpoint), "--checkpoint")
        if writer:
            claim_folder(Path(config.runtime.checkpoint), config.runtime.resume, config.runtime.overwrite)
        latest = latest_manifest(Path(config.runtime.checkpoint)) if config.runtime.resume else None
        if latest is not None:
            refuse_other_shape(latest, run_shape(config))
    if config.runtime.log:
        check_output_file(Path(config.runtime.log), "--log", "the JSON lines")
