"""The supervisor of a local launch: one spawned process that imports what the ranks run, once, and forks
them from that warm state. This module imports nothing heavy: the supervisor follows its launcher's life
(`Parent`, its first argument) before it imports torch and the ranks' code (without the garbage
collector: gtool.collector)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from gtool.collector import hold, settle
from gtool.interrupts import end_now
from gtool.trainer.launch.entry import resolved
from gtool.trainer.launch.lineage import Parent


def supervise(launcher: Parent, world_size: int, main: Callable[..., Any], orders: Connection) -> None:
    """Import `main` (an Entry, or a function) and start numba, wait for the ranks' port, notes folder and
    arguments (`orders`: none when the launcher refused the run), fork and watch the ranks
    (`ranks.fork_ranks`), then end at once. Ctrl-C and a hangup (sent to the whole process group) are the
    launcher's to decide; the supervisor dies with it (its ranks with the supervisor)."""
    for launchers in (signal.SIGINT, signal.SIGHUP):
        signal.signal(launchers, signal.SIG_IGN)
    hold()
    from gtool.trainer.launch.numba_start import start_numba
    from gtool.trainer.launch.ranks import fork_ranks

    function = resolved(main)
    start_numba()
    try:
        port, run_dir, args = orders.recv()
    except EOFError:
        end_now(0)
    settle()  # before the fork: the ranks' collections leave the pages they share with it alone
    fork_ranks(world_size, port, run_dir, function, args)
    end_now(0)
