"""Disk bytes each stage's tasks read and write, counted per thread by the kernel (/proc/thread-self/io).

The counters are storage I/O: bytes read from the device (including readahead and memory-mapped pages
faulted in) and bytes of page cache dirtied by writes; what the page cache serves is not counted. Each task
adds its thread's difference to its worker process's totals, which the parent collects at the end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROC_IO = "/proc/thread-self/io"


@dataclass
class StageIO:
    """Disk bytes a stage's tasks read and wrote, and the seconds they ran (summed over tasks)."""

    read: int = 0
    written: int = 0
    task_seconds: float = 0.0

    def add(self, other: StageIO) -> None:
        self.read += other.read
        self.written += other.written
        self.task_seconds += other.task_seconds


def thread_io() -> tuple[int, int]:
    """(read_bytes, write_bytes) of the calling thread so far; (0, 0) where the kernel does not say."""
    try:
        with open(PROC_IO, "rb") as file:
            fields = dict(line.split(b":") for line in file.read().splitlines())
        return int(fields[b"read_bytes"]), int(fields[b"write_bytes"])
    except (OSError, KeyError, ValueError):
        return 0, 0


_TOTALS: dict[tuple[str, str], StageIO] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Measured:
    """fn, its disk bytes and seconds added to this process's totals of (run, stage) on every call."""

    fn: Callable[..., Any]
    run: str
    stage: str

    def __call__(self, *args: Any) -> Any:
        read, written = thread_io()
        start = time.perf_counter()
        try:
            return self.fn(*args)
        finally:
            read_after, written_after = thread_io()
            spent = StageIO(read_after - read, written_after - written, time.perf_counter() - start)
            with _LOCK:
                _TOTALS.setdefault((self.run, self.stage), StageIO()).add(spent)


def take_totals(run: str) -> dict[str, StageIO]:
    """This process's totals of a run by stage, forgotten here once taken."""
    with _LOCK:
        keys = [key for key in _TOTALS if key[0] == run]
        return {key[1]: _TOTALS.pop(key) for key in keys}
