"""The ranks of a local launch, forked and watched by its supervisor: when one fails, the others are
stopped at once and the failure of the rank that failed first is left for the launcher."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

from gtool.interrupts import end_now
from gtool.trainer.launch.environment import LOOPBACK, RankEnv
from gtool.trainer.launch.failures import RankFailed, rank_failure, read_failure, write_failure
from gtool.trainer.launch.lineage import die_with_parent

WATCH_S = 0.5
"""How often the supervisor looks for stopped ranks while it waits for them."""


def _local_rank(
    rank: int,
    world_size: int,
    port: int,
    run_dir: str,
    main: Callable[..., Any],
    args: tuple,
    supervisor: int,
) -> None:
    """Entry point of a forked rank: run main(env, *args), leaving the error in a file when it fails."""
    die_with_parent(supervisor)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the supervisor ignores Ctrl-C, a rank not
    env = RankEnv(rank, world_size, rank, LOOPBACK, port, "local", run_dir)
    try:
        main(env, *args)
    except BaseException as error:
        write_failure(run_dir, rank_failure(rank, error), f"rank-{rank}.json")
        raise
    end_now(0)


def _first_failure(
    error: ProcessRaisedException | ProcessExitedException, error_dir: Path, stopped: list[int]
) -> RankFailed:
    """The rank that failed first: one killed by a signal, else a stopped one (the others gave up waiting
    for it: their errors are only the consequence), else the earliest error written."""
    if isinstance(error, ProcessExitedException) and error.signal_name:
        return RankFailed(error.error_index, f"killed by signal {error.signal_name}")
    written = sorted(error_dir.glob("rank-*.json"), key=lambda p: p.stat().st_mtime_ns)
    first = read_failure(written[0]) if written else None
    if stopped:
        seen = f"rank {first.rank} gave up waiting: {first.error}" if first else str(error).strip()
        return RankFailed(stopped[0], f"stopped (SIGSTOP, Ctrl-Z or a debugger) and not responding; {seen}")
    if first is None:
        return RankFailed(error.error_index, str(error).strip())
    return RankFailed(first.rank, first.error, first.details.strip())


def stopped_ranks(processes: list[Any]) -> list[int]:
    """The ranks whose process is stopped (by SIGSTOP or SIGTSTP, or held by a debugger)."""
    stopped = []
    for rank, process in enumerate(processes):
        try:
            if psutil.Process(process.pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                stopped.append(rank)
        except psutil.Error:
            continue
    return stopped


def fork_ranks(world_size: int, port: int, run_dir: str, main: Callable[..., Any], args: tuple) -> None:
    """In a local launch's supervisor (which imported what the ranks run, unpickling `main`, and started
    numba): fork the ranks, watch them, and leave the failure of the rank that failed first in run_dir."""
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)  # RankFailed says who failed
    context = mp.start_processes(
        _local_rank,
        args=(world_size, port, run_dir, main, args, os.getpid()),
        nprocs=world_size,
        join=False,
        start_method="fork",
    )
    stopped: list[int] = []
    try:
        while not context.join(timeout=WATCH_S, grace_period=1.0):
            stopped = stopped_ranks(context.processes)  # seen before a failure stops every rank
    except (ProcessRaisedException, ProcessExitedException) as error:
        write_failure(run_dir, _first_failure(error, Path(run_dir), stopped))
    finally:
        stopped = stopped_ranks(context.processes)
        for rank, process in enumerate(context.processes):
            if rank in stopped:
                process.kill()  # a stopped process would handle SIGTERM only once continued
            elif process.is_alive():
                process.terminate()
        for process in context.processes:
            process.join(timeout=10)
