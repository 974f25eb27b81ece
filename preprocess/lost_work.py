"""What a user is told when the cluster loses a stage's work: worker processes that died, a scheduler gone."""

from __future__ import annotations

from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from gtool.errors import GtoolError

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
