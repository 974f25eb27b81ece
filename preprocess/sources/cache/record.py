"""What a run did with the copies of its compressed inputs (made or reused, bytes, time), for its summary;
and the copies it uses, held until it ends so that `gtool cache clear` leaves them."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from rich.progress import Progress


@dataclass
class Preparation:
    """What a run did with its compressed inputs: the copies it made (deflated members extracted, gzipped
    files decompressed, CSV files converted; `where` of each, bytes, seconds) and those it reused."""

    progress: Progress | None = None
    extracted: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    extracted_bytes: int = 0
    reused_bytes: int = 0
    extract_seconds: float = 0.0
    folder: str = ""
    seconds: float = 0.0
    held: list[int] = field(default_factory=list)
    """Descriptors of the copies this run uses, each with a shared lock (see `hold`)."""
    holding: bool = True
    """False for the record kept outside `watching`, which nobody closes: it holds nothing."""

    def made(self, where: list[str], size: int, seconds: float) -> None:
        """Copies of `where` were made: `size` bytes in `seconds`."""
        self.extracted += where
        self.extracted_bytes += size
        self.extract_seconds += seconds

    def reuse(self, where: str, size: int) -> None:
        """The copy of `where` (`size` bytes) was there already."""
        self.reused.append(where)
        self.reused_bytes += size

    def hold(self, copy: str) -> bool:
        """Keep `copy` open with a shared lock until `close`: `gtool cache clear`, which takes an exclusive
        one to remove a copy, leaves it to this run. False when the copy is gone (removed before the lock
        was had), so the caller makes it again."""
        if not self.holding:
            return os.path.exists(copy)
        try:
            fd = os.open(copy, os.O_RDONLY)
        except FileNotFoundError:
            return False
        with contextlib.suppress(OSError):  # a file system without locks: held in name only
            fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            same = os.stat(copy).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            return False
        self.held.append(fd)
        return True

    def close(self) -> None:
        """Let go of the copies held: the run is over."""
        while self.held:
            os.close(self.held.pop())


_watching: ContextVar[Preparation | None] = ContextVar("gtool_preparation", default=None)


@contextmanager
def watching(progress: Progress | None = None) -> Iterator[Preparation]:
    """Record the copies made in this context (with a progress bar per extraction, if `progress` is given)."""
    record = Preparation(progress)
    token = _watching.set(record)
    try:
        yield record
    finally:
        _watching.reset(token)


def recorded() -> Preparation:
    """The record being kept (outside `watching`, one that nobody reads and that holds nothing)."""
    return _watching.get() or Preparation(holding=False)
