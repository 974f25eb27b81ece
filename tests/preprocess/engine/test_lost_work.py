"""A task whose work the cluster lost (its worker processes died, the scheduler went away) and a --scheduler
that cannot be reached are one error line naming the stage or the address, not a Dask traceback; a cluster
that has had no workers for a while is said to wait for them."""

from __future__ import annotations

import logging
import time

import pytest
from distributed.client import FutureCancelledError
from distributed.scheduler import KilledWorker

from gtool.errors import GtoolError
from gtool.preprocess.engine import cluster
from gtool.preprocess.engine.cluster import StageRunner, dask_engine
from gtool.preprocess.engine.lost_work import watching_workers


def told(exc: BaseException) -> str:
    """The error StageRunner raises for `exc` from a task of the stage 'map edges'."""
    runner = StageRunner(None, None, False)  # type: ignore[arg-type]
    runner.labels["task-3"] = "map edges"
    with pytest.raises(GtoolError) as info, runner.telling_lost_work():
        raise exc
    return str(info.value)


def test_workers_that_died_running_a_task_name_its_stage_and_the_memory_limit() -> None:
    message = told(KilledWorker("task-3", None, 3))  # type: ignore[arg-type]
    assert message.startswith("a 'map edges' task was started 4 times and each time the worker process")
    assert "out-of-memory killer" in message and "--memory-limit" in message


def test_a_lost_scheduler_is_named() -> None:
    message = told(FutureCancelledError("task-3", "scheduler-connection-lost"))
    assert message.startswith("the connection to the Dask scheduler was lost during 'map edges'")


def test_other_cancellations_are_raised_as_they_are() -> None:
    with pytest.raises(FutureCancelledError):
        told(FutureCancelledError("task-3", "cancelled by the run"))


def test_a_scheduler_that_cannot_be_reached_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(address: str) -> None:
        raise OSError(f"Timed out trying to connect to {address} after 30 s")

    monkeypatch.setattr(cluster, "Client", unreachable)
    with pytest.raises(GtoolError) as info, dask_engine("tcp://head:8786", 1, 1 << 30):
        pass
    assert str(info.value).startswith("--scheduler tcp://head:8786: cannot connect (Timed out trying to")


class FakeClient:
    """A client whose cluster has the worker counts given, one per poll, then the last one."""

    def __init__(self, *counts: int):
        self.counts = list(counts)

    def nthreads(self) -> dict[str, int]:
        count = self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]
        return {f"tcp://w{i}": 1 for i in range(count)}


def watched(client: FakeClient, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The notices of watching_workers on `client` over 50 polls."""
    with caplog.at_level(logging.WARNING, logger="gtool"), watching_workers(client, "tcp://h", 0.01, 0.001):
        time.sleep(0.1)
    return [record.getMessage() for record in caplog.records]


def test_a_cluster_without_workers_is_said_once_to_wait_for_them(caplog: pytest.LogCaptureFixture) -> None:
    notices = watched(FakeClient(2, 0), caplog)
    assert notices == [
        "notice: the Dask cluster at tcp://h has had no workers for 0 s: the run waits for workers to join "
        "(start some, or stop the run with Ctrl-C)"
    ]


def test_a_cluster_with_workers_is_not_told_about(caplog: pytest.LogCaptureFixture) -> None:
    assert watched(FakeClient(0, 2), caplog) == []
