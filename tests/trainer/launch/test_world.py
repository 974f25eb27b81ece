"""The rendezvous of a local launch, and gloo's connections, use the loopback address only."""

from __future__ import annotations

import os
from datetime import timedelta

import psutil
import pytest
import torch.distributed as dist

from gtool.trainer.launch.environment import RankEnv, free_port
from gtool.trainer.launch.world import join_world, loopback_interface

LOOPBACK = "127.0.0.1"


def test_local_rendezvous_listens_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "unset")  # recorded, so that the test's value is undone
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
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
    interface = loopback_interface()
    assert interface is not None and LOOPBACK in [a.address for a in psutil.net_if_addrs()[interface]]
    assert os.environ["GLOO_SOCKET_IFNAME"] == interface
