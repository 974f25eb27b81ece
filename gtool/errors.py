"""Error types that carry what a user needs to fix their input."""

from __future__ import annotations

import signal


class GtoolError(Exception):
    """Base class of every error gtool reports to a user (printed without a traceback)."""


class InputError(GtoolError):
    """Bad input: names the file, the line or array/index, and what was expected."""

    def __init__(self, where: str, problem: str, *, line: int | None = None, index: str | None = None):
        self.where = where
        self.line = line
        self.index = index
        self.problem = problem
        location = where
        if line is not None:
            location += f", line {line}"
        if index is not None:
            location += f", {index}"
        super().__init__(f"{location}: {problem}")

    def __reduce__(self):  # keep the fields when a Dask worker process sends the error back
        return (_rebuild_input_error, (self.where, self.problem, self.line, self.index))


def _rebuild_input_error(where: str, problem: str, line: int | None, index: str | None) -> InputError:
    return InputError(where, problem, line=line, index=index)


class StoreError(GtoolError):
    """A store that cannot be read: incomplete, unknown layout, or inconsistent arrays."""


class StoreExistsError(GtoolError):
    """The output store exists and --overwrite was not given."""


class DamagedChunkError(StoreError):
    """A stored chunk whose bytes fail their checksum or cannot be decoded."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP: the terminal closed) arrived: the run unwinds as after Ctrl-C, cleaning up what
    it wrote; `signum` is the signal (its exit status 128 + signum)."""

    def __init__(self, message: str = "", signum: int = signal.SIGTERM):
        super().__init__(message)
        self.signum = signum


ENDED_BY: dict[int, str] = {
    signal.SIGTERM: "terminated",
    signal.SIGINT: "interrupted",
    signal.SIGHUP: "hung up",
}
"""The last word of a command that SIGTERM, SIGINT or SIGHUP ended (its exit status is then 128 + the
signal)."""


def signum_of(interrupt: KeyboardInterrupt) -> int:
    """The signal that ended a run: a Terminated's own, else SIGINT (Ctrl-C)."""
    return interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT


class InterruptedWhenDone(KeyboardInterrupt):
    """SIGTERM, SIGINT or SIGHUP came once the work asked for was complete (a store published): the run
    stopped early, but what it made is whole; the message says so (the command line exits 0)."""
