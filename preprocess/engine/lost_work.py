"""What a user is told when the cluster loses a stage's work: worker processes that died, a scheduler gone."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from gtool.errors import GtoolError
from gtool.preprocess.engine.watch import watching

LOST_WORK = (KilledWorker, FutureCancelledError)
"""What Dask raises for a task whose work was lost rather than failed (a failed task raises its own error)."""


def lost_work_key(exc: BaseException) -> str | None:
    """The key of the task whose work `exc` (one of LOST_WORK) says was lost."""
    return str(exc.task) if isinstance(exc, KilledWorker) else str(getattr(exc, "key", None))


def lost_work_error(exc: BaseException, label: str) -> GtoolError | None:
    """The one-line error for a task of stage `label` whose work was lost; None for another cancellation."""
    if isinstance(exc, KilledWorker):
        return GtoolError(
            f"a '{label}' task was started {exc.allowed_failures + 1} times and each time the worker process "
            "running it died: it was killed from outside the run, most likely by the kernel's out-of-memory "
            "killer for a memory limit (a container's, a cgroup's, a job scheduler's) below --memory-limit; "
            "give a --memory-limit that fits the memory this run may really use, or fewer --workers"
        )
    if isinstance(exc, FutureCancelledError) and "connection-lost" in exc.reason:
        return GtoolError(
            f"the connection to the Dask scheduler was lost during '{label}' (the scheduler stopped, or the "
            "network between them failed): start the scheduler and its workers again, and rerun"
        )
    return None


def unreachable_scheduler(address: str, exc: OSError) -> GtoolError:
    """The one-line error for a --scheduler that cannot be reached."""
    return GtoolError(
        f"--scheduler {address}: cannot connect ({exc}): is a Dask scheduler running at that address and "
        "reachable from this machine?"
    )


def watching_workers(
    client: Any, address: str, patience: float = 60.0, poll: float = 5.0
) -> AbstractContextManager[None]:
    """While open, say once (a `notice:` line) when an external cluster has had no workers for `patience`
    seconds: its tasks then wait for workers to join (an adaptive cluster starts them, a job scheduler may be
    slow to), and the run, whose progress bars stand still, would seem stuck. Said again should they all go
    once more."""
    return watching("gtool-workers", watch_workers, client, address, patience, poll)


def watch_workers(client: Any, address: str, patience: float, poll: float, stopping: threading.Event) -> None:
    """Poll the scheduler's worker count every `poll` seconds until `stopping` is set (watching_workers)."""
    without: float | None = None
    told = False
    while not stopping.wait(poll):
        try:
            workers = len(client.nthreads())
        except Exception:  # a lost scheduler is reported by the tasks' results
            continue
        if workers:
            without, told = None, False
            continue
        without = without if without is not None else time.monotonic()
        if not told and time.monotonic() - without >= patience:
            told = True
            logging.getLogger("gtool").warning(
                "notice: the Dask cluster at %s has had no workers for %.0f s: the run waits for workers to "
                "join (start some, or stop the run with Ctrl-C)",
                address,
                patience,
            )
