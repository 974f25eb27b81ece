"""Ranks started as local processes: the launcher's side. It spawns one supervisor (`supervisor`), which
forks and watches the ranks (`ranks`); it shows them getting ready, and raises the failure of the rank
that failed first as `RankFailed`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from gtool.collector import settle
from gtool.cores import available_cores
from gtool.errors import GtoolError
from gtool.memory import RANK_BASE_BYTES, machine_memory
from gtool.trainer.launch.environment import LOOPBACK, READY_PREFIX, RankEnv, free_port
from gtool.trainer.launch.failures import FAILURE, read_failure
from gtool.trainer.launch.lineage import Parent
from gtool.trainer.launch.supervisor import supervise
from gtool.units import human_bytes

NOTES_PREFIX = "gtool-ranks-"
"""The start of the name of a launcher's notes folder (`notes_folder`)."""
NOTES_TOUCH_S = 10.0
"""How often a launcher touches its notes folder while its ranks run."""
NOTES_STALE_S = 60.0
"""How long a notes folder must have been left untouched before a launch may remove it."""
READY_WATCH_S = 0.1
"""How often a local launch counts the ranks that are ready, while they start."""


@contextmanager
def numba_share(world_size: int) -> Iterator[None]:
    """While the supervisor is spawned: numba's thread pool (NUMBA_NUM_THREADS, read when the supervisor
    imports numba, for every rank it forks) sized to one rank's share of this machine's cores, unless the
    environment sets it, so that ranks do not keep threads busy on the cores the other ranks compute on."""
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
    """While the supervisor is spawned (which starts multiprocessing's resource tracker, unless running): the
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
    available = machine_memory().available
    if world_size * RANK_BASE_BYTES > available:
        raise GtoolError(
            f"{world_size} local ranks need at least {human_bytes(world_size * RANK_BASE_BYTES)} (about "
            f"{human_bytes(RANK_BASE_BYTES)} each before any data), but {human_bytes(available)} is "
            "available: use a smaller grid, or start the ranks on several machines with torchrun or srun"
        )


def notes_folder() -> str:
    """A new folder for the ranks' notes to this launcher (ready, failure) in the temporary folder, named
    for this launcher (gtool-ranks-PID@HOST-*), once the folders of this user's launchers on this machine
    that no longer run are removed: a launcher killed by SIGKILL could not remove its own (the kernel
    kills its supervisor and ranks with it). A launcher touches its folder while it waits for its ranks,
    so a folder touched lately is kept even when its pid is not one this process sees (a launcher in
    another pid namespace, such as a container sharing this temporary folder and host name)."""
    host = socket.gethostname()
    for folder in Path(tempfile.gettempdir()).glob(f"{NOTES_PREFIX}*@*-*"):
        if left_behind(folder, host):
            shutil.rmtree(folder, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{NOTES_PREFIX}{os.getpid()}@{host}-")


def left_behind(folder: Path, host: str) -> bool:
    """Whether `folder` is the notes folder of a launcher of this user on `host` that no longer runs."""
    launcher = folder.name[len(NOTES_PREFIX) :].rsplit("-", 1)[0]
    pid, _, its_host = launcher.partition("@")
    try:
        status = folder.stat()
    except OSError:
        return False
    mine, quiet = status.st_uid == os.getuid(), time.time() - status.st_mtime > NOTES_STALE_S
    return mine and quiet and its_host == host and pid.isdigit() and not psutil.pid_exists(int(pid))


def wait_for(supervisor: Any, run_dir: str) -> None:
    """Wait for the supervisor to end, touching the notes folder every NOTES_TOUCH_S (see `notes_folder`)."""
    while supervisor.is_alive():
        touch(run_dir)
        supervisor.join(timeout=NOTES_TOUCH_S)


def touch(run_dir: str | Path) -> None:
    """Mark the notes folder as its launcher's, alive (see `notes_folder`)."""
    with contextlib.suppress(OSError):
        os.utime(run_dir)


def _show_ready(run_dir: Path, world_size: int, supervisor: Any, label: str) -> None:
    """Until every rank of the launch has joined the run (or the supervisor ended): "ranks ready k/N" on
    stderr, updated in place on a terminal, once at the end otherwise."""
    started = time.perf_counter()
    terminal = sys.stderr.isatty()
    shown = -1
    ready = 0
    while supervisor.is_alive() and ready < world_size:
        ready = len(list(run_dir.glob(f"{READY_PREFIX}*")))
        if terminal and ready != shown:
            print(f"\r{label}: ranks ready {ready}/{world_size}", end="", file=sys.stderr, flush=True)
            shown = ready
        touch(run_dir)
        supervisor.join(timeout=READY_WATCH_S)
    if ready == world_size:
        line = f"{label}: ranks ready {ready}/{world_size} in {time.perf_counter() - started:.1f}s"
        print(f"\r{line}" if terminal else line, file=sys.stderr, flush=True)
    elif terminal and shown >= 0:
        print(file=sys.stderr, flush=True)


class LocalLaunch:
    """The supervisor of `world_size` local ranks running main(RankEnv, *args), spawned as soon as the
    launcher knows it will start them: it imports torch, gtool and `main`'s module once, and starts numba,
    while the launcher checks the run; `run` then hands it the ranks' arguments and the ranks are forked
    from that warm state. Nothing of the launcher's state reaches them but what `main` and `args` carry.
    Closed without a run (a refusal), the supervisor ends at once."""

    def __init__(self, world_size: int, main: Callable[..., Any]):
        refuse_beyond_memory(world_size)
        self.world_size = world_size
        self.run_dir: str | None = None
        """The ranks' notes to the launcher (ready, failure): made by `run`, removed by `close`."""
        context = mp.get_context("spawn")
        orders, self.orders = context.Pipe(duplex=False)
        with numba_share(world_size), quiet_resource_tracker():
            self.supervisor = context.Process(
                target=supervise,
                args=(Parent(os.getpid()), world_size, main, orders),
                name="gtool-ranks",
            )
            self.supervisor.start()
        orders.close()

    def run(self, *args: Any, label: str | None = None) -> None:
        """Fork the ranks with `args` and wait for them; raise RankFailed if one fails. `label` (the
        command) shows them getting ready."""
        self.run_dir = notes_folder()
        with contextlib.suppress(BrokenPipeError):  # the supervisor is gone: its status says why
            self.orders.send((free_port(), self.run_dir, args))
        settle()  # this launcher now waits for its ranks (gtool.collector)
        if label is not None:
            _show_ready(Path(self.run_dir), self.world_size, self.supervisor, label)
        wait_for(self.supervisor, self.run_dir)
        failure = Path(self.run_dir) / FAILURE
        if failure.exists():
            raise read_failure(failure)
        status = self.supervisor.exitcode
        if status != 0:
            raise GtoolError(f"the supervisor of the local ranks ended with status {status}")

    def close(self) -> None:
        """End the supervisor if it still runs (the launcher was interrupted, or refused the run: its ranks
        die with it), and remove the ranks' notes."""
        self.orders.close()
        if self.supervisor.is_alive():
            self.supervisor.kill()
        self.supervisor.join()
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> LocalLaunch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch_local(
    world_size: int,
    main: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    started: LocalLaunch | None = None,
) -> None:
    """Run main(RankEnv, *args) in `world_size` local processes (through `started`, a LocalLaunch of
    them spawned earlier, when given); raise RankFailed if one fails."""
    with started or LocalLaunch(world_size, main) as launch:
        launch.run(*args, label=label)


def run_local(world_size: int, main: Callable[..., Any], *args: Any) -> None:
    """`launch_local`, except that a world of one rank runs in this process (a spawned one would only
    add its start-up)."""
    if world_size == 1:
        main(RankEnv(0, 1, 0, LOOPBACK, free_port(), "local"), *args)
        return
    launch_local(world_size, main, *args)
