"""Processes that never outlive the process that started them.

A local launch's supervisor and ranks are told the pid of their parent when they are started (not read
after their imports, when the parent may be gone already). On Linux the kernel kills them when their
parent dies (PR_SET_PDEATHSIG); elsewhere a thread watches the parent. What a rank publishes (a
checkpoint, a prediction) is published only while its parent lives: `refuse_orphaned`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from gtool.errors import GtoolError

PR_SET_PDEATHSIG = 1
WATCH_S = 0.5
"""How often a process watches its parent where the kernel cannot do it."""

_parent: int | None = None
"""The pid of the process this one must not outlive (None: not started by a local launch)."""


class Orphaned(GtoolError):
    """The process that started this one is gone: nothing may be published."""


def _kernel_kills_orphans() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; False where it cannot (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, name="gtool-parent-watch", daemon=True).start()


@dataclass(frozen=True)
class Parent:
    """The pid of the process that starts this one, as an argument of a spawned child: unpickled first
    of its arguments, it ties the child's life to its parent before the rest (which imports torch, for
    seconds) is unpickled."""

    pid: int

    def __reduce__(self) -> tuple:
        return (follow, (self.pid,))


def follow(parent: int) -> Parent:
    """`die_with_parent(parent)`, as a spawned child unpickles its Parent."""
    die_with_parent(parent)
    return Parent(parent)


def die_with_parent(parent: int) -> None:
    """End this process when `parent` (the pid its starter passed in) dies, and at once if it is gone."""
    global _parent
    _parent = parent
    if not _kernel_kills_orphans():
        _watch_parent(parent)
    if os.getppid() != parent:  # died before the request above: the kernel will not signal it now
        os._exit(1)


def orphaned() -> bool:
    """Whether this process was started by a local launch whose process is gone."""
    return _parent is not None and os.getppid() != _parent


def refuse_orphaned(what: str) -> None:
    """Raise Orphaned instead of publishing `what` when the launch that started this rank is gone."""
    if orphaned():
        raise Orphaned(f"the gtool process that started this rank is gone: {what} is not published")
