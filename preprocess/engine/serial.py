"""The runner of a run too small to repay a cluster: this process runs each stage's tasks itself, one after
the other as they are submitted, behind StageRunner's interface and progress bars.

Starting the embedded cluster costs about 0.3 s (importing distributed, a scheduler and workers, their
shutdown), more than all the stages of a graph of a few thousand edges take (the pipeline decides which
runs are that small: gtool.preprocess.pipeline.small_run).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rich.console import Console

from gtool.preprocess.engine.iostats import Measured, StageIO, take_totals
from gtool.preprocess.engine.shape import stage_progress

T = TypeVar("T")


@dataclass(frozen=True)
class Done:
    """A task that has run: its result (what a StageRunner's future is to the stages)."""

    value: Any


def resolved(item: Any) -> Any:
    """`item` with every Done in it, in tuples and lists as Dask looks into them, replaced by its result."""
    if isinstance(item, Done):
        return item.value
    if isinstance(item, tuple | list):
        return type(item)(resolved(part) for part in item)
    return item


class SerialRunner:
    """Runs fn(item, *args) for every item of a stage in this process, at once when it is submitted."""

    def __init__(self, console: Console | None, show: bool):
        self.run_id = uuid.uuid4().hex
        self.progress = stage_progress(console, show)

    def __enter__(self) -> SerialRunner:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def on_every_worker(self, fn: Callable[[], Any]) -> None:
        """fn() once, here."""
        fn()

    def run(self, label: str, fn: Callable[..., T], items: Sequence[Any], *args: Any) -> Iterator[T]:
        """fn(item, *args) for every item, in order."""
        yield from self.collect(self.submit(label, fn, items, *args))

    def submit(
        self, label: str, fn: Callable[..., T], items: Sequence[Any], *args: Any, priority: int = 0
    ) -> list[Done]:
        """Run fn(item, *args) for every item now (Done inside an item or an argument passed as its
        result); `priority` orders nothing here, where every task has run by the time the next is
        submitted."""
        bar = self.progress.add_task(label, total=len(items))
        task, given = Measured(fn, self.run_id, label), resolved(args)
        done = []
        for item in items:
            done.append(Done(task(resolved(item), *given)))
            self.progress.advance(bar)
        return done

    def collect(self, done: list[Done]) -> Iterator[Any]:
        """The results of submitted tasks, in order."""
        for task in done:
            yield task.value

    def finish(self, done: list[Done]) -> None:
        """Nothing left to wait for: submitting ran the tasks."""

    def when_finished(self, done: list[Done], then: Iterable[Callable[[], None]]) -> None:
        """Call every then[k]() now: the tasks have finished."""
        for action in then:
            action()

    def stage_io(self) -> dict[str, StageIO]:
        """Disk bytes and task seconds of every stage run so far."""
        return take_totals(self.run_id)
