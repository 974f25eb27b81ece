"""What a run did with the copies of its compressed inputs (made or reused, bytes, time), for its summary."""

from __future__ import annotations

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

    def made(self, where: list[str], size: int, seconds: float) -> None:
        """Copies of `where` were made: `size` bytes in `seconds`."""
        self.extracted += where
        self.extracted_bytes += size
        self.extract_seconds += seconds

    def reuse(self, where: str, size: int) -> None:
        """The copy of `where` (`size` bytes) was there already."""
        self.reused.append(where)
        self.reused_bytes += size


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
    """The record being kept (one that nobody reads outside `watching`)."""
    return _watching.get() or Preparation()
