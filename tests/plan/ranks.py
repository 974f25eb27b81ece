"""What each rank of the plan tests' spawned worlds does: train one epoch per grid and write down what
it measured (collective bytes from the trainer's own counters, live tensor bytes from LiveTensorBytes)."""

from __future__ import annotations

import gc
import json
import warnings
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from gtool.grid import ProcessGrid
from gtool.loader import load_rank
from gtool.plan.tensorbytes import LiveTensorBytes
from gtool.trainer.config import TrainConfig
from gtool.trainer.distributed import build_grid_comm
from gtool.trainer.launch import RankEnv
from gtool.trainer.loop import Trainer
from gtool.trainer.timing import PhaseTimer

CPU = torch.device("cpu")


def _measure(config: TrainConfig, rank: int, comm, epochs: int) -> dict:
    data = load_rank(config.store, grid=config.grid, rank=rank, layers=config.layers)
    trainer = Trainer(data, comm, config, CPU)
    del data
    result: dict = {"peak": [], "static": [], "comm_bytes": []}
    for epoch in range(1, epochs + 1):
        with LiveTensorBytes() as memory:
            static = memory.current
            record = trainer.train_epoch(epoch)
        result["static"].append(static)
        result["peak"].append(memory.peak)
        result["comm_bytes"].append(record.comm_bytes[rank])
    return result


def measure_grids(
    env: RankEnv, config: TrainConfig, grids: list[tuple[int, int, int]], epochs: int, out: str
) -> None:
    """Entry point of every rank: for each grid its ranks fit in, train `epochs` epochs and save figures."""
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=120),
    )
    try:
        for dims in grids:
            grid = ProcessGrid(*dims)
            comm = build_grid_comm(grid, 120, PhaseTimer(CPU), CPU)
            if comm is not None:
                result = _measure(replace(config, grid=dims), env.rank, comm, epochs)
                name = Path(out) / f"{grid}-rank-{env.rank}.json"
                name.write_text(json.dumps(result))
            gc.collect()
            dist.barrier()
    finally:
        dist.destroy_process_group()
