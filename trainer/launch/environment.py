"""Who this process is in a run: torchrun's or srun's environment, or a local launch's."""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gtool.errors import GtoolError

DEFAULT_PORT = 29500


LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


READY_PREFIX = "ready-"
"""The files by which the ranks of a local launch say that they joined the run."""


@dataclass(frozen=True)
class RankEnv:
    """Who this process is in the run and where rank 0 listens."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    launcher: str
    run_dir: str | None = None
    """A local launch's folder of the ranks' notes to their launcher."""

    def announce_ready(self) -> None:
        """Tell a local launch that this rank has joined the run (its launcher shows how many have)."""
        if self.run_dir is not None:
            (Path(self.run_dir) / f"{READY_PREFIX}{self.rank}").touch()


SLURM_PORTS = 3000
"""How many ports above DEFAULT_PORT srun's jobs spread over when MASTER_PORT is not set (below the
ephemeral ports Linux hands out, from 32768)."""


def _first_slurm_host(nodelist: str) -> str:
    """The first host name of a SLURM node list (via scontrol, which expands 'node[01-04]')."""
    try:
        listed = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError) as error:
        reason = "scontrol is not installed here" if isinstance(error, OSError) else "scontrol failed"
        raise GtoolError(
            f"srun started this rank without MASTER_ADDR, and the first host of SLURM_JOB_NODELIST "
            f"{nodelist!r} cannot be found ({reason}): export MASTER_ADDR=HOST (rank 0's) before srun"
        ) from None
    return listed.stdout.split()[0]


def slurm_port(env: dict[str, str]) -> int:
    """MASTER_PORT, else a port of srun's job (from SLURM_JOB_ID): two jobs on one node do not collide."""
    if "MASTER_PORT" in env:
        return int(env["MASTER_PORT"])
    return DEFAULT_PORT + int(env.get("SLURM_JOB_ID", "0")) % SLURM_PORTS


def environment_rank(env: dict[str, str] | None = None) -> RankEnv | None:
    """This process's rank when torchrun (RANK, WORLD_SIZE, ...) or a multi-task srun started it.

    srun is recognized by SLURM_STEP_NUM_TASKS, which only a job step has: a batch script also sees
    SLURM_PROCID=0 and SLURM_NTASKS, and must launch its ranks locally (or through srun) instead."""
    env = dict(os.environ if env is None else env)
    port = int(env.get("MASTER_PORT", DEFAULT_PORT))  # torchrun always sets it
    if "RANK" in env and "WORLD_SIZE" in env:
        if "MASTER_ADDR" not in env:
            raise GtoolError("RANK and WORLD_SIZE are set but MASTER_ADDR is not: start ranks with torchrun")
        rank, size, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))
        return RankEnv(rank, size, local, env["MASTER_ADDR"], port, "torchrun")
    if "SLURM_PROCID" in env and int(env.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
        addr = env.get("MASTER_ADDR") or _first_slurm_host(env["SLURM_JOB_NODELIST"])
        rank, size = int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"])
        return RankEnv(rank, size, int(env.get("SLURM_LOCALID", 0)), addr, slurm_port(env), "srun")
    return None
