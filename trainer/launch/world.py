"""Joining a run's default process group and choosing a rank's device; local worlds stay on loopback."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import psutil
import torch
import torch.distributed as dist

from gtool.errors import GtoolError
from gtool.trainer.launch.environment import LOOPBACK, RankEnv
from gtool.trainer.launch.rendezvous import join_store


def join_world(env: RankEnv, backend: str, timeout: timedelta) -> None:
    """Join this process to the run's default process group: under torchrun or srun once every rank came
    to the rendezvous (gtool.trainer.launch.rendezvous: a rank that refused the run ends the wait); a local
    launch's rank 0 listens, and gloo connects its ranks, on the loopback interface only."""
    store: dist.Store
    if env.launcher == "local":
        store = loopback_store(env, timeout)
        interface = loopback_interface()
        if interface is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
    else:
        store = join_store(env, timeout)  # every rank is there: init_process_group does not wait
    dist.init_process_group(backend, rank=env.rank, world_size=env.world_size, timeout=timeout, store=store)
    env.announce_ready()


def loopback_interface() -> str | None:
    """The network interface holding the loopback address (lo on Linux), if the machine has one. Without
    GLOO_SOCKET_IFNAME, gloo's ranks listen and connect on the address the host name resolves to, which
    may be an interface other machines reach."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(address.address == LOOPBACK for address in addresses):
            return name
    return None


def loopback_store(env: RankEnv, timeout: timedelta) -> dist.TCPStore:
    """The rendezvous store of a local launch. torch's TCPStore server listens on every interface of the
    machine; rank 0 hands it a socket bound to the loopback address instead, so nothing outside this
    machine can reach it."""
    if env.rank != 0:
        return dist.TCPStore(env.master_addr, env.master_port, env.world_size, False, timeout)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, env.master_port))
    listener.listen()
    return dist.TCPStore(
        LOOPBACK, env.master_port, env.world_size, True, timeout, False, master_listen_fd=listener.detach()
    )


def rank_device(env: RankEnv, device_type: str, backend: str) -> torch.device:
    """The CPU, or GPU LOCAL_RANK: one per rank with NCCL; with gloo, LOCAL_RANK modulo the GPUs there
    are, so that several ranks can share one GPU (collectives then go through the host)."""
    if device_type == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise GtoolError(f"--device cuda (--backend {backend}) needs CUDA GPUs, and torch sees none")
    index = env.local_rank if backend == "nccl" else env.local_rank % torch.cuda.device_count()
    device = torch.device("cuda", index)
    torch.cuda.set_device(device)
    return device
