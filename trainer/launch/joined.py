"""A rank joined to its run: threads, device and the grid's process groups set up; and a rank's
failure raised as that of the rank to blame (a peer that died on this machine, else this rank)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from gtool.collector import settle
from gtool.errors import GtoolError, Terminated
from gtool.trainer.comm.groups import GridComm, grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.failures import RankFailed, rank_failure
from gtool.trainer.launch.peers import gone_peers, hosts, remember_peers
from gtool.trainer.launch.rendezvous import blame, note_own_failure, peer_trouble
from gtool.trainer.launch.world import join_world, rank_device

STARTUP_TIMEOUT = timedelta(minutes=30)
"""How long ranks wait for each other while joining and loading (the slowest load sets the pace)."""
PEER_EXIT_SECONDS = 5.0
"""How long a rank whose collective failed waits to see a peer on its machine end (a loaded machine is slow
to finish a killed process) before it takes the failure for its own."""


def join_grid(env: RankEnv, config: TrainConfig) -> tuple[torch.device, GridComm]:
    """This rank's threads and device set, joined to the run's world: its device and its grid groups."""
    torch.set_num_threads(config.runtime.threads)
    device = rank_device(env, config.runtime.device_type, config.runtime.backend)
    settle()  # imports done: what they made is frozen (gtool.collector)
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


def run_here(env: RankEnv, main: Callable[..., Any], *args: Any) -> None:
    """`run_rank` in this process, one rank of torchrun's or srun's (or a world of one); when the launcher
    stops it after another rank died, the failure is that rank's."""
    try:
        run_rank(env, main, *args)
    except Terminated as ended:  # torchrun stops the other ranks when one dies, often before they see it go
        if ended.signum != signal.SIGTERM:  # a hangup sent to every rank
            raise
        if failed := blame(env.rank, hosts, None):
            raise failed from None
        if gone := gone_peers():
            stopped = f"its process ended; then {env.launcher} stopped rank {env.rank}"
            raise RankFailed(gone[0], stopped) from None
        raise


def run_rank(env: RankEnv, main: Callable[..., Any], *args: Any) -> None:
    """main(env, *args), an error raised as the failure of the rank it names: this rank's own, or, when
    its error is a peer's trouble (a connection lost), the peer's that failed first or that was lost."""
    try:
        main(env, *args)
    except RankFailed:  # names the rank to blame already (one that refused the run before joining)
        raise
    except Exception as error:
        if env.launcher == "local" and dist.is_initialized():
            dist.destroy_process_group()  # a world of one in this process: no peer waits for it
        own = rank_failure(env.rank, error)
        if isinstance(error, GtoolError) or not peer_trouble(error):  # a refusal, a bug: its own
            note_own_failure(env.rank, own.error)
            raise own from None
        if failed := blame(env.rank, hosts, error):
            raise failed from None
        if gone := gone_peers(patience=PEER_EXIT_SECONDS):  # the error seen here is only the consequence
            raise RankFailed(gone[0], f"its process ended; rank {env.rank} saw: {error}") from None
        raise own from None
