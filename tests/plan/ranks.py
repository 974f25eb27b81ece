"""What each rank of the plan tests' spawned worlds does: train one epoch per case and write down what
it measured (collective bytes from the trainer's own counters, as --log records them, and optionally
live tensor bytes from LiveTensorBytes)."""

from __future__ import annotations

import contextlib
import gc
import json
import warnings
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from gtool.grid import ProcessGrid
from gtool.loader import load_rank
from gtool.plan.tensorbytes import LiveTensorBytes
from gtool.trainer.config import TrainConfig
from gtool.trainer.distributed import GridComm, build_grid_comm
from gtool.trainer.launch import RankEnv
from gtool.trainer.loop import Trainer
from gtool.trainer.timing import PhaseTimer

CPU = torch.device("cpu")


def _measure(config: TrainConfig, comm: GridComm, track_memory: bool) -> dict:
    data = load_rank(config.store, grid=config.grid, rank=comm.rank, layers=config.layers)
    trainer = Trainer(data, comm, config, CPU)
    del data
    memory = LiveTensorBytes() if track_memory else contextlib.nullcontext()
    with memory:
        record = trainer.train_epoch(1)
    result = {"comm_bytes": record.comm_bytes[comm.rank]}
    if track_memory:
        result["peak"] = memory.peak
    return result


def measure_cases(env: RankEnv, cases: list[tuple[str, TrainConfig]], track_memory: bool, out: str) -> None:
    """Entry point of every rank: train one epoch of each case its grid has room for; save the figures
    as OUT/NAME-rank-R.json."""
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
        for name, config in cases:
            comm = build_grid_comm(ProcessGrid(*config.grid), 120, PhaseTimer(CPU), CPU)
            if comm is not None:
                result = _measure(config, comm, track_memory)
                (Path(out) / f"{name}-rank-{env.rank}.json").write_text(json.dumps(result))
            gc.collect()
    finally:
        dist.destroy_process_group()
