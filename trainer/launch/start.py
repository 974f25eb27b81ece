"""A command's ranks started and joined to the grid: under torchrun or srun, in this process, or spawned."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from gtool.errors import GtoolError, Terminated
from gtool.trainer.comm.groups import GridComm, grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.environment import LOOPBACK, RankEnv, environment_rank
from gtool.trainer.launch.failures import RankFailed, rank_failure
from gtool.trainer.launch.local import launch_local
from gtool.trainer.launch.peers import gone_peers, remember_peers
from gtool.trainer.launch.ranks import warm_numba
from gtool.trainer.launch.world import free_port, join_world, rank_device

STARTUP_TIMEOUT = timedelta(minutes=30)
"""How long ranks wait for each other while joining and loading (the slowest load sets the pace)."""
PEER_EXIT_SECONDS = 5.0
"""How long a rank whose collective failed waits to see a peer on its machine end (a loaded machine is slow
to finish a killed process) before it takes the failure for its own."""


def run_layout(config: TrainConfig) -> str:
    """The grid as GXxGYxGZ, or D x GXxGYxGZ with replicas."""
    grid = "x".join(map(str, config.grid))
    replicas = config.minibatch.data_parallel
    return f"{replicas} x {grid}" if replicas > 1 else grid


def join_grid(env: RankEnv, config: TrainConfig) -> tuple[torch.device, GridComm]:
    """This rank's threads and device set, joined to the run's world: its device and its grid groups."""
    torch.set_num_threads(config.runtime.threads)
    device = rank_device(env, config.runtime.device_type, config.runtime.backend)
    if device.type == "cpu":
        warm_numba()  # before the timed epochs (a local launch's supervisor did it for its ranks)
    join_world(env, config.runtime.backend, STARTUP_TIMEOUT)
    if env.launcher != "local":
        remember_peers(env.rank)
    timer = PhaseTimer(device)
    comm = grid_comm(
        config.process_grid,
        config.runtime.timeout,
        timer,
        device,
        replicas=config.minibatch.data_parallel,
    )
    return device, comm.cast_all_reduces(config.cast_dtype)


def start_ranks(config: TrainConfig, command: str, main: Callable[..., Any], *args: Any) -> None:
    """main(RankEnv, *args) on every rank of `config`'s grid, started as `train` is; `command` names the
    gtool command in what it prints."""
    env = environment_rank()
    if env is None and config.world_size == 1:
        env = RankEnv(0, 1, 0, LOOPBACK, free_port(), "local")
    if env is None or (env.world_size == 1 and config.world_size > 1):
        quiet = config.runtime.quiet
        if not quiet:
            print(
                f"gtool {command}: starting {config.world_size} local rank(s) for grid {run_layout(config)} "
                f"({config.runtime.backend}, {config.runtime.device_type}); "
                "each loads only its tiles",
                file=sys.stderr,
                flush=True,
            )
        launch_local(config.world_size, main, *args, label=None if quiet else f"gtool {command}")
        return
    if env.world_size != config.world_size:
        raise GtoolError(
            f"grid {run_layout(config)} needs {config.world_size} ranks, "
            f"{env.launcher} started {env.world_size}"
        )
    try:
        run_rank(env, main, *args)
    except Terminated:  # torchrun stops the other ranks when one dies, often before they see it go
        if gone := gone_peers():
            stopped = f"its process ended; then {env.launcher} stopped rank {env.rank}"
            raise RankFailed(gone[0], stopped) from None
        raise


def run_rank(env: RankEnv, main: Callable[..., Any], *args: Any) -> None:
    """main(env, *args), an error raised as the failure of the rank it names."""
    try:
        main(env, *args)
    except Exception as error:
        if env.launcher == "local" and dist.is_initialized():
            dist.destroy_process_group()  # a world of one in this process: no peer waits for it
        gone = [] if isinstance(error, GtoolError) else gone_peers(patience=PEER_EXIT_SECONDS)
        if gone:  # the error seen here (a connection reset) is only the consequence; a refusal is its own
            raise RankFailed(gone[0], f"its process ended; rank {env.rank} saw: {error}") from None
        raise rank_failure(env.rank, error) from None
