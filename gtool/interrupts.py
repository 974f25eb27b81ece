"""SIGTERM (timeout, SLURM, docker stop), SIGINT (Ctrl-C) and SIGHUP (the terminal or SSH session closed)
end a run the way an error does: cleaned up. A SIGHUP that is ignored (`nohup`) stays ignored.

The first signal raises Terminated or KeyboardInterrupt in the main thread so the run unwinds through its
own cleanup, and starts a watchdog that runs the registered cleanups and exits if the process still runs
GRACE_SECONDS later (Python drops exceptions raised in some places; a second signal exits at once); a run
`check`s for a signal before it publishes. Once the work is complete (`completing`), a signal is held and
raised as InterruptedWhenDone when the outermost block ends, so that shutting down is never cut short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from gtool.errors import ENDED_BY, InterruptedWhenDone, Terminated

if TYPE_CHECKING:
    from sys import UnraisableHookArgs

GRACE_SECONDS = 30.0
"""How long a signalled run may take to unwind before the watchdog cleans up and exits."""
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
"""The signals that raise Terminated (SIGINT raises KeyboardInterrupt)."""


def handled_signals() -> list[int]:
    """The signals a block handles: SIGNALS, but SIGHUP only where it is not ignored (`nohup`)."""
    return [s for s in SIGNALS if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN]


class Interrupts:
    """Inside the block, SIGTERM, SIGINT and SIGHUP end the run as described above; cleanups given to
    `on_abandon` are what the watchdog (or a second signal) runs before exiting. Blocks nest: an inner
    block's completed work, and a signal held there, become the enclosing block's when the inner one ends.
    Outside the main thread, where Python cannot set handlers, nothing changes."""

    def __init__(self) -> None:
        self.cleanups: list[Callable[[], None]] = []
        self.previous: dict[int, object] = {}
        self.previous_hook = sys.unraisablehook
        self.received: int | None = None
        self.done: str | None = None
        """What the completed work made (set by `completing`), for the message of a later signal."""
        self.deferring = False
        self.owner = os.getpid()
        """The run's process: a process forked inside the block (a Dask worker) inherits the handlers."""

    def on_abandon(self, cleanup: Callable[[], None]) -> None:
        """Run `cleanup` (last registered first) should the run be abandoned after a signal."""
        self.cleanups.append(cleanup)

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self.handle) for s in handled_signals()}
            self.previous_hook, sys.unraisablehook = sys.unraisablehook, self.unraisable
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        enclosing = getattr(self.previous.get(signal.SIGTERM), "__self__", None)
        for number, handler in self.previous.items():
            signal.signal(number, handler)  # type: ignore[arg-type]
        if self.previous:
            sys.unraisablehook = self.previous_hook
        if self.done is None:
            return
        if isinstance(enclosing, Interrupts):  # the work is complete for the enclosing block (the command's)
            enclosing.done = self.done
            enclosing.received = enclosing.received or self.received
        elif self.received is not None and exc_type is None:
            raise InterruptedWhenDone(self.after_done(self.received))

    def unraisable(self, unraisable: UnraisableHookArgs) -> None:
        """Python's report of an exception it dropped (raised in a garbage-collector callback, a
        finalizer): silent for the one a signal raised, which `check` raises again; others as before."""
        if self.received is not None and isinstance(unraisable.exc_value, Terminated | KeyboardInterrupt):
            return
        self.previous_hook(unraisable)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """In a process forked inside the block (a Dask worker), nothing: a signal sent to the whole
        process group (a terminal's Ctrl-C, `kill -- -PGID`) is the run's to handle, and the run stops its
        workers as it unwinds (a worker that raised it printed a traceback of Dask's process bootstrap)."""
        if os.getpid() != self.owner:
            return
        if self.received is not None:
            self.abandon(signum)
        self.received = signum
        threading.Thread(target=self.abandon_later, args=(signum,), daemon=True).start()
        if not self.deferring:
            self.check()

    def check(self) -> None:
        """Raise what a signal received before the work was complete raises (Terminated for SIGTERM and
        SIGHUP, else KeyboardInterrupt), again: the run calls this before it publishes, so that a signal
        whose exception Python dropped still ends it. Once the work is complete, nothing: the block's end
        raises."""
        if self.received is None or self.done is not None:
            return
        if self.received in TERMINATING:
            raise Terminated(f"terminated by {signal.Signals(self.received).name}", self.received)
        raise KeyboardInterrupt

    def after_done(self, signum: int) -> str:
        """What a signal that came once the work was complete says."""
        return f"{signal.Signals(signum).name} came after {self.done}"

    @contextmanager
    def completing(self, done: str) -> Iterator[None]:
        """The step that completes the work (publishing the store), of which `done` says what it made: a
        signal that came before it ends the run as usual; one that comes during a step that fails is raised
        once it is over; from the step's success on, a signal is held for the block's end."""
        self.check()
        self.deferring = True
        try:
            yield
            self.done = done
        finally:
            self.deferring = False
        self.check()

    def abandon_later(self, signum: int) -> None:
        time.sleep(GRACE_SECONDS)
        self.abandon(signum)

    def abandon(self, signum: int) -> None:
        """Run the cleanups and exit with the signal's status, saying so as an unwound run does (with 0,
        saying that, once the work is done)."""
        for cleanup in reversed(self.cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        said = f"notice: {self.after_done(signum)}" if self.done is not None else ENDED_BY[signum]
        with contextlib.suppress(OSError):
            os.write(2, f"{said}\n".encode())
        os._exit(0 if self.done is not None else 128 + signum)


def end_now(status: int) -> NoReturn:
    """End this process with `status` once its output is flushed, skipping the interpreter's teardown:
    its work is done, and the teardown (torch's, numba's, zarr's IO thread, multiprocessing's exit
    hooks) takes seconds, and at times prints a traceback of a thread that did not stop in time."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can reach it
            stream.flush()
    os._exit(status)
