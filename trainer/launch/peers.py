"""The ranks of a torchrun or srun world that share this rank's machine, remembered when it joins: when
a collective fails because a peer went away, the rank that saw it can name the peer that died (on its own
machine) instead of only itself."""

from __future__ import annotations

import socket
import time

import psutil
import torch.distributed as dist

POLL_SECONDS = 0.02
_local: dict[int, int] = {}
"""rank -> pid of the other ranks on this machine (known once the rank joined)."""
hosts: list[str] = []
"""Every rank's host, by rank (known once the rank joined)."""


def remember_peers(rank: int) -> None:
    """Gather every rank's host and pid (once, at start): keep the hosts, and the pids of the ranks on this
    machine."""
    mine = (socket.gethostname(), psutil.Process().pid)
    everyone: list[tuple[str, int] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    hosts[:] = [p[0] if p is not None else "?" for p in everyone]
    _local.clear()
    _local.update(
        {r: p[1] for r, p in enumerate(everyone) if p is not None and p[0] == mine[0] and r != rank}
    )


def gone_peers(patience: float = 0.0) -> list[int]:
    """The ranks on this machine whose process has ended since the world was joined (none in a local
    launch, whose ranks do not remember their peers: their supervisor names a rank that ended). With
    `patience`, looked for again until one is found or that many seconds passed: a killed process closes
    its connections before it is seen to end, so its peer's error may come first."""
    deadline = time.monotonic() + patience
    while not (gone := [rank for rank, pid in sorted(_local.items()) if _ended(pid)]) and _local:
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    return gone


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


def running_peers() -> list[int]:
    """The ranks on this machine whose process still runs (alive, though they left no note yet)."""
    return [rank for rank, pid in sorted(_local.items()) if not _ended(pid)]
