"""The rendezvous of a local launch listens on the loopback address only."""

from __future__ import annotations

from datetime import timedelta

import psutil
import torch.distributed as dist

from gtool.trainer.launch import RankEnv, free_port, join_world

LOOPBACK = "127.0.0.1"


def test_local_rendezvous_listens_on_loopback_only() -> None:
    before = {c.laddr for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    port = free_port()
    join_world(RankEnv(0, 1, 0, LOOPBACK, port, "local"), "gloo", timedelta(seconds=30))
    try:
        listening = [
            c.laddr
            for c in psutil.Process().net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr not in before
        ]
    finally:
        dist.destroy_process_group()
    assert (LOOPBACK, port) in [(a.ip, a.port) for a in listening]
    assert all(a.ip == LOOPBACK for a in listening), listening
