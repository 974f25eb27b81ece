"""The Dask engine: an embedded local cluster by default, or an existing one by scheduler address."""

from __future__ import annotations

import functools
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import dask
from distributed import Client, Future, LocalCluster, as_completed
from rich.console import Console

from gtool.preprocess.engine.iostats import Measured, StageIO, take_totals
from gtool.preprocess.engine.lost_work import (
    LOST_WORK,
    lost_work_error,
    lost_work_key,
    unreachable_scheduler,
    watching_workers,
)
from gtool.preprocess.engine.shape import Engine, run_shape, stage_progress
from gtool.preprocess.engine.stalls import DEFAULT_TIMEOUT, watching_stalls

T = TypeVar("T")

_QUIET_WORKER = {
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
    "distributed.worker.memory.terminate": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.multiprocessing-method": "fork" if sys.platform == "linux" else "spawn",
}
"""The embedded cluster's Dask settings: memory management, profiling and GIL monitoring off (the pipeline
sizes its tasks from the budget); the event loops' health tick every second, not every 20 ms (Dask's
default, whose ticks of the scheduler, nannies and workers keep an idle cluster busy); workers forked on
Linux."""


def quiet_dask_logs() -> None:
    """A failed task is re-raised here with its message, a task whose workers died or a lost scheduler as
    one error line (see gtool.preprocess.engine.lost_work); Dask's own log of them would only repeat it.
    Tornado's log of a failed event-loop callback is Dask's too (a signal that cancels a pending client
    call made distributed's `sync` raise NameError there: a traceback after the run's one line)."""
    for name in ("distributed.worker", "distributed.scheduler", "distributed.client", "tornado.application"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    logging.getLogger("distributed").setLevel(logging.ERROR)


@contextmanager
def dask_engine(
    scheduler: str | None,
    workers: int,
    memory_limit: int,
    worker_timeout: float = DEFAULT_TIMEOUT,
    dashboard: bool = False,
) -> Iterator[Engine]:
    """A client of an existing cluster, or of an embedded local cluster with `workers` workers.

    One worker runs as a thread of this process. More run as worker processes of one thread each
    (forked on Linux, so they start in well under a second): numpy, compression and the zarr and Dask
    machinery then run without sharing one GIL, which threads of one process do not scale past about
    two workers. Each process gets its share of `memory_limit`; Dask's own memory management stays off
    because the pipeline sizes its tasks from the budget and keeps intermediate data in its spill files.
    No dashboard unless `dashboard` (on a free port); the scheduler's own HTTP endpoints take a free port
    (on 8787, Dask's default, a second run at once would print Dask's warning that the port is taken).
    Workers that send no heartbeat for `worker_timeout` seconds are restarted
    (gtool.preprocess.engine.stalls).
    """
    quiet_dask_logs()
    if scheduler:
        try:
            client = Client(scheduler)
        except OSError as exc:
            raise unreachable_scheduler(scheduler, exc) from None
        with client, watching_workers(client, scheduler), watching_stalls(client, worker_timeout):
            yield Engine(client, max(1, sum(client.nthreads().values())), 0, external=True)
        return
    processes = workers > 1
    with (
        dask.config.set(_QUIET_WORKER),
        LocalCluster(
            n_workers=workers if processes else 1,
            threads_per_worker=1 if processes else workers,
            processes=processes,
            dashboard_address=":0" if dashboard else None,
            scheduler_kwargs={"dashboard_address": ":0"},
            memory_limit=memory_limit // workers if processes else 0,
        ) as cluster,
        Client(cluster) as client,
        watching_stalls(client, worker_timeout),
    ):
        yield Engine(client, *run_shape(None, workers))


class StageRunner:
    """Runs each pipeline stage as Dask tasks with a progress bar, yielding results as they finish."""

    def __init__(self, client: Client, console: Console | None, show: bool):
        self.client = client
        self.run_id = uuid.uuid4().hex
        self.progress = stage_progress(console, show)
        self.pending: set[Future] = set()
        self.labels: dict[str, str] = {}
        """The stage of each submitted task, by key: what an error about a task whose work was lost names."""
        self.stopping = threading.Event()
        """Set once unfinished tasks are cancelled (the run failed or was interrupted): a cancelled task
        may still be running, so what it reads must stay (see gtool.preprocess.spill.SharedReads)."""
        self.let_go: set[str] = set()
        """Keys of finished tasks whose results were let go of (`finish`, `when_finished`): their futures
        read 'cancelled'."""

    def __enter__(self) -> StageRunner:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel(self.pending)
        self.progress.__exit__(*exc)

    def cancel(self, futures: Iterable[Future]) -> None:
        """Cancel the unfinished ones among `futures` in one call to the scheduler (a call per future
        costs this process time, even for a finished one)."""
        unfinished = [f for f in futures if not f.done()]
        if unfinished:
            self.stopping.set()
            self.client.cancel(unfinished)

    def on_every_worker(self, fn: Callable[[], Any]) -> None:
        """Start fn() once on every worker, ahead of every task submitted later (its result unused; a
        failure shows again where the tasks that need it run)."""
        for worker in self.client.scheduler_info()["workers"]:
            future = self.client.submit(
                fn, pure=False, workers=[worker], allow_other_workers=False, priority=100
            )
            self.pending.add(future)

    def run(self, label: str, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> Iterator[T]:
        """fn(item, *args) for every item on the cluster; results in completion order."""
        yield from self.collect(self.submit(label, fn, items, *args))

    def submit(
        self, label: str, fn: Callable[..., T], items: Sequence[Any], *args: Any, priority: int = 0
    ) -> list[Future]:
        """Start fn(item, *args) for every item (futures inside an item are passed as their results, once
        done). Tasks of priority -1 (background) run only when a worker has no other task, filling the
        gaps of the stages submitted after them (collect them at the end); tasks of priority 1 go ahead
        of queued ones as soon as their inputs are done."""
        bar = self.progress.add_task(label, total=len(items))
        futures = self.client.map(
            Measured(fn, self.run_id, label),
            items,
            *[[a] * len(items) for a in args],
            pure=False,
            priority=priority,
        )
        for future in futures:
            future.add_done_callback(lambda _: self.progress.advance(bar))
        self.pending.update(futures)
        self.labels.update(dict.fromkeys((str(future.key) for future in futures), label))
        return futures

    @contextmanager
    def telling_lost_work(self) -> Iterator[None]:
        """Turn Dask's report of a task whose work was lost (its workers died, the scheduler went away) into
        one error line naming the task's stage."""
        try:
            yield
        except LOST_WORK as exc:
            label = self.labels.get(lost_work_key(exc) or "", "a")
            if (error := lost_work_error(exc, label)) is not None:
                raise error from None
            raise

    def stage_io(self) -> dict[str, StageIO]:
        """Disk bytes and task seconds of every stage run so far, summed over the workers."""
        totals: dict[str, StageIO] = {}
        for by_stage in self.client.run(take_totals, self.run_id).values():
            for stage, io in by_stage.items():
                totals.setdefault(stage, StageIO()).add(io)
        return totals

    def when_finished(self, futures: list[Future], then: list[Callable[[], None]]) -> None:
        """Call then[k]() once futures[k] has finished, after letting go of its result (its future is
        released), unless the run is stopping by then. Dask runs a finished task again when the worker that
        holds its result dies while a client still holds the future; then[k] may free what the task reads
        (a spill file), so the future goes first. For tasks whose results are not needed (`finish`)."""
        for future, action in zip(futures, then, strict=True):
            future.add_done_callback(functools.partial(self._finished, then=action))

    def _finished(self, future: Future, then: Callable[[], None]) -> None:
        """The callback of `when_finished`: a future that `finish` let go of first reads 'cancelled'."""
        if self.stopping.is_set():
            return
        if future.status == "finished" or str(future.key) in self.let_go:
            self.let_go.add(str(future.key))
            future.release()
            then()

    def finish(self, futures: list[Future]) -> None:
        """Wait for tasks whose results are not needed (the first failure is raised): a finished task's
        result is not fetched, which would cost a round trip to its worker per task."""
        try:
            with self.telling_lost_work():
                for future in as_completed(futures):
                    if future.status != "finished" and str(future.key) not in self.let_go:
                        future.result()
                    self.let_go.add(str(future.key))
                    future.release()
        finally:
            self.cancel(futures)
            self.pending.difference_update(futures)

    def collect(self, futures: list[Future]) -> Iterator[T]:
        """Results of submitted tasks in completion order (the first failure is raised). The tasks done
        by the time the last batch was taken are fetched in one call, from all their workers at once: a
        call per result is a round trip of this process, which a stage of a few hundred short tasks on
        many workers would spend with every worker idle."""
        try:
            with self.telling_lost_work():
                for done in as_completed(futures).batches():
                    results = self.client.gather(done)
                    for future in done:
                        future.release()
                    yield from results
        finally:
            self.cancel(futures)
            self.pending.difference_update(futures)
