"""Ranks started as local processes and watched: when one fails, the others are stopped at once and the
error of the rank that failed first is raised as `RankFailed`.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

from gtool.cores import available_cores
from gtool.errors import GtoolError
from gtool.trainer.launch.environment import LOOPBACK, RankEnv
from gtool.trainer.launch.world import free_port
from gtool.units import human_bytes

WATCH_S = 0.5
"""How often a local launch looks for stopped ranks while it waits for them."""


RANK_BASE_BYTES = 300 << 20
"""Memory of a spawned rank before it loads anything (Python, torch, zarr: about 380 MB RSS measured)."""


class RankFailed(GtoolError):
    """A rank of a local launch failed; the others were stopped."""

    def __init__(self, rank: int, error: str, details: str = ""):
        self.rank = rank
        self.error = error
        self.details = details
        super().__init__(f"rank {rank} failed: {error}")


def rank_failure(rank: int, error: BaseException) -> RankFailed:
    """`error`, raised in rank `rank`, as a RankFailed (with its traceback unless it is a user error)."""
    details = "" if isinstance(error, GtoolError) else traceback.format_exc()
    return RankFailed(rank, f"{type(error).__name__}: {error}", details)


def _exit_with_parent() -> None:
    """Exit this process soon after the process that spawned it is gone (killed launcher)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="gtool-parent-watch", daemon=True).start()


def _local_rank(
    rank: int, world_size: int, port: int, error_dir: str, main: Callable[..., Any], args: tuple
) -> None:
    """Entry point of a spawned rank: run main(env, *args), leaving the error in a file when it fails."""
    _exit_with_parent()
    env = RankEnv(rank, world_size, rank, LOOPBACK, port, "local")
    try:
        main(env, *args)
    except BaseException as error:
        failure = rank_failure(rank, error)
        report = {"rank": rank, "error": failure.error, "details": failure.details}
        (Path(error_dir) / f"rank-{rank}.json").write_text(json.dumps(report))
        raise


def _first_failure(
    error: ProcessRaisedException | ProcessExitedException, error_dir: Path, stopped: list[int]
) -> RankFailed:
    """The rank that failed first: one killed by a signal, else a stopped one (the others gave up waiting
    for it: their errors are only the consequence), else the earliest error written."""
    if isinstance(error, ProcessExitedException) and error.signal_name:
        return RankFailed(error.error_index, f"killed by signal {error.signal_name}")
    written = sorted(error_dir.glob("rank-*.json"), key=lambda p: p.stat().st_mtime_ns)
    first = json.loads(written[0].read_text()) if written else None
    if stopped:
        seen = f"rank {first['rank']} gave up waiting: {first['error']}" if first else str(error).strip()
        return RankFailed(stopped[0], f"stopped (SIGSTOP, Ctrl-Z or a debugger) and not responding; {seen}")
    if first is None:
        return RankFailed(error.error_index, str(error).strip())
    return RankFailed(first["rank"], first["error"], first["details"].strip())


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


@contextmanager
def numba_share(world_size: int) -> Iterator[None]:
    """While ranks are spawned: numba's thread pool (NUMBA_NUM_THREADS, read when a rank imports numba)
    sized to one rank's share of this machine's cores, unless the environment sets it, so that ranks do
    not keep threads busy on the cores the other ranks compute on."""
    if "NUMBA_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["NUMBA_NUM_THREADS"] = str(max(1, available_cores() // world_size))
    try:
        yield
    finally:
        del os.environ["NUMBA_NUM_THREADS"]


TRACKER_WARNING = "ignore:resource_tracker:UserWarning"
"""The warnings filter that silences multiprocessing's resource tracker about semaphores left registered."""


@contextmanager
def quiet_resource_tracker() -> Iterator[None]:
    """While ranks are spawned (which starts multiprocessing's resource tracker, unless running): the
    tracker does not warn of the semaphores a killed or terminated rank left registered (numcodecs' lock,
    which it unlinks anyway), so that a run's last line stays its own."""
    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [before, TRACKER_WARNING]))
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = before


def refuse_beyond_memory(world_size: int) -> None:
    """Refuse to spawn more local ranks than this machine's available memory holds at RANK_BASE_BYTES each."""
    available = psutil.virtual_memory().available
    if world_size * RANK_BASE_BYTES > available:
        raise GtoolError(
            f"{world_size} local ranks need at least {human_bytes(world_size * RANK_BASE_BYTES)} (about "
            f"{human_bytes(RANK_BASE_BYTES)} each before any data), but {human_bytes(available)} is "
            "available: use a smaller grid, or start the ranks on several machines with torchrun or srun"
        )


def launch_local(world_size: int, main: Callable[..., Any], *args: Any) -> None:
    """Run main(RankEnv, *args) in `world_size` spawned processes; raise RankFailed if one fails."""
    refuse_beyond_memory(world_size)
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)  # RankFailed says who failed
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="gtool-ranks-") as error_dir:
        with numba_share(world_size), quiet_resource_tracker():
            context = mp.start_processes(
                _local_rank,
                args=(world_size, port, error_dir, main, args),
                nprocs=world_size,
                join=False,
                start_method="spawn",
            )
        stopped: list[int] = []
        try:
            while not context.join(timeout=WATCH_S, grace_period=1.0):
                stopped = stopped_ranks(context.processes)  # seen before a failure stops every rank
        except (ProcessRaisedException, ProcessExitedException) as error:
            raise _first_failure(error, Path(error_dir), stopped) from None
        finally:
            stopped = stopped_ranks(context.processes)
            for rank, process in enumerate(context.processes):
                if rank in stopped:
                    process.kill()  # a stopped process would handle SIGTERM only once continued
                elif process.is_alive():
                    process.terminate()
            for process in context.processes:
                process.join(timeout=10)


def run_local(world_size: int, main: Callable[..., Any], *args: Any) -> None:
    """`launch_local`, except that a world of one rank runs in this process (a spawned one would only
    add its start-up)."""
    if world_size == 1:
        main(RankEnv(0, 1, 0, LOOPBACK, free_port(), "local"), *args)
        return
    launch_local(world_size, main, *args)
