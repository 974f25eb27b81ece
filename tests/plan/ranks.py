"""What each rank of the plan tests' spawned worlds does: train one epoch per case and write down what
it measured (collective bytes from the trainer's own counters, as --log records them, and optionally
live tensor bytes from LiveTensorBytes)."""

from __future__ import annotations

import contextlib
import gc
import json
from pathlib import Path

import torch

from gtool.store.reader import Store, TileData
from gtool.trainer.comm.groups import GridComm, GroupCache
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.launch.environment import RankEnv
from tests.support.tensorbytes import LiveTensorBytes
from tests.trainer.cases import grid_comm, joined_world

CPU = torch.device("cpu")


def _measure(config: TrainConfig, comm: GridComm, track_memory: bool) -> dict:
    trainer = Trainer(model_grid(config, comm), config)
    memory = LiveTensorBytes() if track_memory else contextlib.nullcontext()
    with memory:
        record = trainer.train_epoch(1)
    result = {"comm_bytes": record.comm_bytes[comm.everyone.index]}
    trainer.close()
    if track_memory:
        result["peak"] = memory.peak
    return result


def _remember_tiles() -> None:
    """Make this process read each stored tile once: the cases load the same store on grid after grid,
    and what is measured (collective bytes, live tensor bytes) does not depend on how tiles are read."""
    read = Store.read_tile
    tiles: dict[tuple, TileData] = {}

    def read_once(store: Store, matrix: int, i: int, j: int) -> TileData:
        key = (store.location, matrix, i, j)
        if key not in tiles:
            tiles[key] = read(store, matrix, i, j)
        return tiles[key]

    Store.read_tile = read_once


def measure_cases(env: RankEnv, cases: list[tuple[str, TrainConfig, bool]], out: str) -> None:
    """Entry point of every rank: train one epoch of each case (name, config, whether to track memory)
    its grid has room for; save the figures as OUT/NAME-rank-R.json."""
    _remember_tiles()
    made: GroupCache = {}
    with joined_world(env):
        for name, config, track_memory in cases:
            comm = grid_comm(config, made)
            if comm is not None:
                result = _measure(config, comm, track_memory)
                (Path(out) / f"{name}-rank-{env.rank}.json").write_text(json.dumps(result))
            if track_memory:
                gc.collect()
