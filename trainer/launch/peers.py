"""The ranks of a torchrun or srun world that share this rank's machine, remembered when it joins: when
a collective fails because a peer went away, the rank that saw it can name the peer that died (on its own
machine) instead of only itself."""

from __future__ import annotations

import socket

import psutil
import torch.distributed as dist

_local: dict[int, int] = {}
"""rank -> pid of the other ranks on this machine (known once the rank joined)."""


def remember_peers(rank: int) -> None:
    """Gather every rank's host and pid (once, at start) and keep those of the ranks on this machine."""
    mine = (socket.gethostname(), psutil.Process().pid)
    everyone: list[tuple[str, int] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    _local.clear()
    _local.update(
        {r: p[1] for r, p in enumerate(everyone) if p is not None and p[0] == mine[0] and r != rank}
    )


def gone_peers() -> list[int]:
    """The ranks on this machine whose process has ended since the world was joined (none in a local
    launch, whose ranks do not remember their peers: their supervisor names a rank that ended)."""
    gone = []
    for rank, pid in sorted(_local.items()):
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                continue
        except psutil.NoSuchProcess:
            pass
        gone.append(rank)
    return gone
