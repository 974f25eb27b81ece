"""Workers that stop answering: named within a bound, restarted, their work run again elsewhere.

A worker that is stopped, hung or cut off keeps its tasks, and Dask removes it only after its own check
(minutes; a scheduler setting a client cannot change), so the run would stand still. This watch follows
every worker's heartbeats (the scheduler's time of the last one, compared between looks, so the machines'
clocks need not agree): a worker silent for `timeout` seconds is named on stderr and restarted through
its nanny (removed when it has none); the scheduler then runs its tasks on the other workers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from gtool.preprocess.engine.watch import watching

DEFAULT_TIMEOUT = 60.0
"""Seconds without a heartbeat before a worker is taken for stalled (--worker-timeout)."""
log = logging.getLogger("gtool")


def watching_stalls(client: Any, timeout: float) -> AbstractContextManager[None]:
    """While open, restart the workers of `client`'s cluster that send no heartbeat for `timeout` s."""
    return watching("gtool-stalls", watch, client, timeout)


def watch(client: Any, timeout: float, stopping: threading.Event) -> None:
    """Look at the heartbeats every timeout/6 s (at most every 5 s) until `stopping` is set."""
    changed: dict[str, tuple[float, float]] = {}
    """Per worker: its last heartbeat's time on the scheduler, and when (here) it last changed."""
    while not stopping.wait(min(5.0, timeout / 6)):
        try:
            workers = client.scheduler_info(n_workers=-1)["workers"]
        except Exception:  # noqa: BLE001 - a lost scheduler is reported by the tasks' results
            continue
        now = time.monotonic()
        stalled = []
        for address, info in workers.items():
            beat = float(info.get("last_seen", 0.0))
            before = changed.get(address)
            if before is None or before[0] != beat:
                changed[address] = (beat, now)
            elif now - before[1] >= timeout:
                stalled.append(address)
        for address in set(changed) - set(workers):
            del changed[address]
        if stalled and not stopping.is_set():
            restart(client, stalled, timeout)
            for address in stalled:
                changed.pop(address, None)


def restart(client: Any, workers: list[str], timeout: float) -> None:
    """Name the stalled workers, and restart them (removed where they have no nanny)."""
    log.warning(
        "notice: Dask worker%s %s sent no heartbeat for %.0f s (stopped, hung or cut off from the network): "
        "restarting %s; %s tasks run again on the other workers",
        "s" if len(workers) > 1 else "",
        ", ".join(sorted(workers)),
        timeout,
        "them" if len(workers) > 1 else "it",
        "their" if len(workers) > 1 else "its",
    )
    try:
        outcome = client.restart_workers(workers, timeout=max(timeout, 10.0), raise_for_error=False)
    except Exception:  # noqa: BLE001 - a worker that cannot be restarted is removed below
        outcome = {}
    for address in workers:
        if outcome.get(address) not in ("OK", "removed"):
            log.warning("notice: could not restart %s (%s): removing it", address, outcome.get(address))
            with contextlib.suppress(Exception):
                client.sync(client.scheduler.unregister, address=address, stimulus_id="gtool-stalled")
