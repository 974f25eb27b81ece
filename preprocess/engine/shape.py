"""What runs a shard's tasks, and how many at once: the embedded Dask cluster, an external one, or this
process alone (a small run); with the progress bars every runner shows its stages with."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from gtool.cores import available_cores
from gtool.preprocess.engine.iostats import StageIO
from gtool.terminal import description_column


def default_workers() -> int:
    """One worker per available core."""
    return available_cores()


@dataclass(frozen=True)
class Engine:
    """The cluster a run uses: its client (None when this process runs the tasks itself), how many tasks
    run at once, and how many worker processes belong to this run's own process tree (they share
    --memory-limit with it; 0 for threads of this process or an external cluster)."""

    client: Any
    concurrency: int
    processes: int
    external: bool = False

    @property
    def dashboard(self) -> str | None:
        """The link to the Dask dashboard when the scheduler runs one that answers from here, else None (the
        scheduler's HTTP server answers there without one: Dask's dashboard needs bokeh)."""
        if self.client is None:
            return None
        if "dashboard" not in self.client.scheduler_info(n_workers=0).get("services", {}):
            return None
        link = self.client.dashboard_link
        try:
            with urllib.request.urlopen(link, timeout=2) as answer:
                return link if answer.status == 200 else None
        except OSError:
            return None


def run_shape(scheduler: str | None, workers: int) -> tuple[int, int]:
    """(tasks at once, worker processes in this run's process tree) of the embedded cluster with `workers`
    workers; for an external cluster, known only once connected, (1, 0): what the budget needs at least."""
    if scheduler:
        return 1, 0
    return workers, workers if workers > 1 else 0


def stage_progress(console: Console | None, show: bool) -> Progress:
    """A bar per stage: its name, done/total tasks, time elapsed (nothing drawn unless `show`)."""
    return Progress(
        description_column(18),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=False,
    )


Task = Any
"""A submitted task, as a runner hands it back: a Dask future (StageRunner) or a task that has run
(SerialRunner); a task inside another's item or arguments is passed as its result."""


class Runner(Protocol):
    """What the stages ask of whatever runs their tasks (engine/cluster.py's StageRunner, on Dask, or
    engine/serial.py's SerialRunner, in this process)."""

    def on_every_worker(self, fn: Callable[[], Any]) -> None: ...

    def run(self, label: str, fn: Callable[..., Any], items: Sequence[Any], *args: Any) -> Iterator[Any]: ...

    def submit(
        self, label: str, fn: Callable[..., Any], items: Sequence[Any], *args: Any, priority: int = 0
    ) -> list[Task]: ...

    def collect(self, tasks: list[Task]) -> Iterator[Any]: ...

    def finish(self, tasks: list[Task]) -> None: ...

    def when_finished(self, tasks: list[Task], then: list[Callable[[], None]]) -> None: ...

    def stage_io(self) -> dict[str, StageIO]: ...
