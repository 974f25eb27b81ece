"""A training run: each rank joins the process group, loads its part of the store and trains."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.store.writing.staging import make_folder
from gtool.trainer.checkpoint import latest_manifest, refuse_other_shape
from gtool.trainer.config import TrainConfig
from gtool.trainer.distributed import GridComm, grid_comm
from gtool.trainer.dropout import cuda_notice
from gtool.trainer.launch import (
    LOOPBACK,
    RankEnv,
    environment_rank,
    free_port,
    join_world,
    launch_local,
    rank_device,
    rank_failure,
)
from gtool.trainer.loop import Trainer, fit, load_model_rank, run_shape
from gtool.trainer.report import Reporter, Summary
from gtool.trainer.timing import PhaseTimer

STARTUP_TIMEOUT = timedelta(minutes=30)
"""How long ranks wait for each other while joining and loading (the slowest load sets the pace)."""


def run_layout(config: TrainConfig) -> str:
    """The grid as GXxGYxGZ, or D x GXxGYxGZ with replicas."""
    grid = "x".join(map(str, config.grid))
    replicas = config.minibatch.data_parallel
    return f"{replicas} x {grid}" if replicas > 1 else grid


def join_grid(env: RankEnv, config: TrainConfig) -> tuple[torch.device, GridComm]:
    """This rank's threads and device set, joined to the run's world: its device and its grid groups."""
    torch.set_num_threads(config.runtime.threads)
    device = rank_device(env, config.runtime.device_type, config.runtime.backend)
    join_world(env, config.runtime.backend, STARTUP_TIMEOUT)
    timer = PhaseTimer(device)
    comm = grid_comm(
        config.process_grid,
        config.runtime.timeout,
        timer,
        device,
        replicas=config.minibatch.data_parallel,
    )
    return device, comm.cast_all_reduces(config.cast_dtype)


def run_rank(env: RankEnv, config: TrainConfig) -> Summary:
    """Everything one rank does in a run.

    A rank that fails leaves its process group alone: its error is recorded first, and its peers learn of
    the failure from the connections closing when the process exits.
    """
    device, comm = join_grid(env, config)
    grid = comm.grid
    reporter = Reporter(env.rank == 0, config.runtime.log, append=config.runtime.resume)
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
    reporter.message(
        f"gtool train: {meta.num_nodes} nodes, {meta.num_features} features, {meta.num_classes} "
        f"classes; grid {run_layout(config)}{placed} ({env.world_size} ranks, {env.launcher}){batches}"
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
    prepare_run_files(config)
    start_ranks(config, "train", run_rank, config)


def prepare_run_files(config: TrainConfig) -> None:
    """The folders of --checkpoint and --log, made before any rank starts: a file in their way, or a --log
    that is a folder, is an error naming it (it was a rank's traceback once the store was loaded); and with
    --resume, a latest checkpoint of another grid, batch size, replicas, dtype, ... is refused (it was,
    once every rank had loaded its part of the store)."""
    if config.runtime.checkpoint:
        make_folder(Path(config.runtime.checkpoint), "--checkpoint")
        latest = latest_manifest(Path(config.runtime.checkpoint)) if config.runtime.resume else None
        if latest is not None:
            refuse_other_shape(latest, run_shape(config))
    if config.runtime.log:
        log = Path(config.runtime.log)
        if log.is_dir():
            raise GtoolError(f"--log {log}: a folder; name a file for the JSON lines")
        make_folder(log.parent, "the folder of --log")


def start_ranks(config: TrainConfig, command: str, main: Callable[..., Any], *args: Any) -> None:
    """main(RankEnv, *args) on every rank of `config`'s grid, started as `train` is; `command` names the
    gtool command in what it prints."""
    env = environment_rank()
    if env is None and config.world_size == 1:
        env = RankEnv(0, 1, 0, LOOPBACK, free_port(), "local")
    if env is None or (env.world_size == 1 and config.world_size > 1):
        print(
            f"gtool {command}: starting {config.world_size} local rank(s) for grid {run_layout(config)} "
            f"({config.runtime.backend}, {config.runtime.device_type}); "
            "each loads only its tiles",
            file=sys.stderr,
            flush=True,
        )
        launch_local(config.world_size, main, *args)
        return
    if env.world_size != config.world_size:
        raise GtoolError(
            f"grid {run_layout(config)} needs {config.world_size} ranks, "
            f"{env.launcher} started {env.world_size}"
        )
    try:
        main(env, *args)
    except Exception as error:
        if env.launcher == "local" and dist.is_initialized():
            dist.destroy_process_group()  # a world of one in this process: no peer waits for it
        raise rank_failure(env.rank, error) from None
