"""The Dask engine: an embedded local cluster by default, or an existing one by scheduler address."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import dask
from distributed import Client, LocalCluster, as_completed
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

T = TypeVar("T")

_QUIET_WORKER = {
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
    "distributed.worker.memory.terminate": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}


def quiet_dask_logs() -> None:
    """A failed task is re-raised here with its message; Dask's own log of it would only repeat it."""
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)
    logging.getLogger("distributed").setLevel(logging.ERROR)


def default_workers() -> int:
    """One worker thread per available core."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@contextmanager
def dask_client(scheduler: str | None, workers: int) -> Iterator[Client]:
    """A client of an existing cluster, or of an embedded local cluster with `workers` threads.

    The local cluster runs its workers as threads of this process: the pipeline's tasks spend their time
    in numpy and compression code that releases the GIL, and one process keeps the memory of the whole
    tree within the budget (its own spill files carry the intermediate data, not Dask's memory).
    """
    quiet_dask_logs()
    if scheduler:
        with Client(scheduler) as client:
            yield client
        return
    with (
        dask.config.set(_QUIET_WORKER),
        LocalCluster(
            n_workers=1, threads_per_worker=workers, processes=False, dashboard_address=None, memory_limit=0
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def concurrency(client: Client) -> int:
    """Tasks the cluster runs at once."""
    return max(1, sum(client.nthreads().values()))


class StageRunner:
    """Runs each pipeline stage as Dask tasks with a progress bar, yielding results as they finish."""

    def __init__(self, client: Client, console: Console | None, show: bool):
        self.client = client
        self.progress = Progress(
            TextColumn("[bold]{task.description:<18}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=not show,
            transient=False,
        )

    def __enter__(self) -> StageRunner:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def run(self, label: str, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> Iterator[T]:
        """fn(item, *args) for every item on the cluster; results in completion order."""
        bar = self.progress.add_task(label, total=len(items))
        futures = self.client.map(fn, items, *[[a] * len(items) for a in args], pure=False)
        try:
            for future in as_completed(futures):
                result = future.result()
                future.release()
                self.progress.advance(bar)
                yield result
        finally:
            for future in futures:
                future.cancel()
