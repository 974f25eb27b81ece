"""A command's ranks started: under torchrun or srun, in this process, or spawned. This side imports no
torch: a local launch's supervisor imports it, once, for the ranks it forks."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gtool.errors import GtoolError
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.environment import LOOPBACK, RankEnv, environment_rank, free_port
from gtool.trainer.launch.local import LocalLaunch, launch_local
from gtool.units import counted


def run_layout(config: TrainConfig) -> str:
    """The grid as GXxGYxGZ, or D x GXxGYxGZ with replicas."""
    grid = "x".join(map(str, config.grid))
    replicas = config.minibatch.data_parallel
    return f"{replicas} x {grid}" if replicas > 1 else grid


def starts_local_ranks(config: TrainConfig, env: RankEnv | None) -> bool:
    """Whether this process (of torchrun's or srun's environment `env`, if any) starts `config`'s ranks as
    local processes: more than one rank, and no launcher around it or one that started only this rank."""
    return config.world_size > 1 and (env is None or env.world_size == 1)


def local_ranks(config: TrainConfig, main: Callable[..., Any]) -> LocalLaunch | None:
    """The supervisor of `config`'s local ranks running `main`, spawned now so that it imports torch
    while this process still checks the run, when this process will start them; else None."""
    return LocalLaunch(config.world_size, main) if starts_local_ranks(config, environment_rank()) else None


def start_ranks(
    config: TrainConfig,
    command: str,
    main: Callable[..., Any],
    *args: Any,
    started: LocalLaunch | None = None,
) -> None:
    """main(RankEnv, *args) on every rank of `config`'s grid, started as `train` is (local ranks through
    `started` when given, see `local_ranks`); `command` names the gtool command in what it prints. `main`
    is best an `Entry`: this process then needs not import it."""
    env = environment_rank()
    if starts_local_ranks(config, env):
        quiet = config.runtime.quiet
        if not quiet:
            print(
                f"gtool {command}: starting {counted(config.world_size, 'local rank')} for grid "
                f"{run_layout(config)} "
                f"({config.runtime.backend}, {config.runtime.device_type}); "
                "each loads only its tiles",
                file=sys.stderr,
                flush=True,
            )
        label = None if quiet else f"gtool {command}"
        launch_local(config.world_size, main, *args, label=label, started=started)
        return
    if env is None:  # a world of one: this process is its rank
        env = RankEnv(0, 1, 0, LOOPBACK, free_port(), "local")
    if env.world_size != config.world_size:
        raise GtoolError(
            f"grid {run_layout(config)} needs {config.world_size} ranks, "
            f"{env.launcher} started {env.world_size}"
        )
    from gtool.trainer.launch.joined import run_here  # this process is the rank: torch is needed now

    run_here(env, main, *args)
