"""The processes of a local launch, as a test finds them from the `gtool` command's process."""

from __future__ import annotations

import psutil


def supervisor(launcher: int) -> psutil.Process | None:
    """The process that forks and watches a local launch's ranks (spawned by the launcher), if running."""
    for child in psutil.Process(launcher).children():
        if "spawn_main" in " ".join(child.cmdline()):
            return child
    return None


def local_ranks(launcher: int) -> list[psutil.Process]:
    """The running ranks of the local launch of process `launcher`, by rank (they are forked in order)."""
    watching = supervisor(launcher)
    return [] if watching is None else sorted(watching.children(), key=lambda p: p.pid)
