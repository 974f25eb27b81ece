"""Grid cases run inside one spawned world: each rank trains its part next to the serial model.

Per case, a rank writes OUT/CASE/rank-R.pt: its largest errors against the serial model (relative to the
largest reference value of the whole quantity), its per-epoch losses, and the blocks other ranks
replicate, for a bitwise check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import order_of_layer_output, padded_slice
from gtool.trainer.comm.groups import AxisGroup, GridComm, GroupCache, build_grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.world import join_world
from gtool.trainer.models.network import FEATURES, Network, placed_parameters
from gtool.trainer.models.serial import SerialGCN
from gtool.trainer.nn.sharded import block_of as place_block
from tests.trainer.references import Reference, stored_order_reference, unpermuted_reference

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Case:
    """One run of `config` for `epochs` epochs, checked against the serial model on the `reference` graph:
    'unpermuted' (rebuilt from the source) or 'stored' (the store's order, where dropout masks agree).
    Three epochs: the first step, steps on the optimizer's state, and a step the final logits alone see."""

    name: str
    config: TrainConfig
    epochs: int = 3
    reference: str = "unpermuted"


def single_rank_comm() -> GridComm:
    """The communicator of a 1x1x1 grid: every group is this rank alone, so nothing needs a process group."""
    return offline_comm(ProcessGrid(1, 1, 1), 0)


def offline_comm(grid: ProcessGrid, rank: int) -> GridComm:
    """Rank `rank`'s place in `grid` without process groups: for what a rank builds or cuts alone."""
    timer = PhaseTimer(CPU)
    coords = grid.coords(rank)
    axes = tuple(AxisGroup(grid.dims[axis], coords[axis], None, timer, CPU) for axis in range(3))
    everyone = AxisGroup(grid.size, rank, None, timer, CPU)
    return GridComm(grid, rank, axes, everyone, timer)  # type: ignore[arg-type]


def block_of(full: torch.Tensor, rows: Band, cols: Band) -> torch.Tensor:
    """The zero-padded block [rows, cols] (padded coordinates) of a matrix."""
    padded = full.new_zeros(full.shape[0] + rows.size, full.shape[1] + cols.size)
    padded[: full.shape[0], : full.shape[1]] = full
    return padded[padded_slice(rows), padded_slice(cols)]


def scaled_error(got: torch.Tensor, want: torch.Tensor, full: torch.Tensor) -> float:
    """max |got - want| over the block, relative to the largest value of the whole reference `full` (absolute
    when the reference is all zeros)."""
    error = float((got - want).abs().max()) if got.numel() else 0.0
    return error / (float(full.abs().max()) or 1.0)


def _reference(case: Case) -> Reference:
    config = case.config
    build = unpermuted_reference if case.reference == "unpermuted" else stored_order_reference
    return build(config.store, config.model.layers, config.torch_dtype)


def gradient_error(model: Network, serial: SerialGCN) -> float:
    """Largest error of this rank's parameter-gradient blocks against the serial gradients (every
    parameter, by name: the serial twins carry the parallel blocks' names; learned features, whose rows
    are in the store's order, show in the losses and logits)."""
    worst = 0.0
    placed = placed_parameters(model)
    assert set(placed) == set(serial.parameters), (sorted(placed), sorted(serial.parameters))
    for name, block in placed.items():
        if name == FEATURES:
            continue
        full = serial.parameters[name].grad
        assert full is not None, f"the serial model's {name} has no gradient"
        want = place_block(full, block.place)
        worst = max(worst, scaled_error(block.assemble(block.shard.grad), want, full))
    return worst


def _logits_error(trainer: Trainer, serial: SerialGCN, rows: np.ndarray) -> tuple[float, float]:
    """Error of this rank's logits block against the serial logits of the same nodes, and the largest
    magnitude in its padding rows (which must stay zero)."""
    logits = trainer.logits()
    grid, layout = trainer.grid, trainer.model.output
    band = grid.node_band(layout.roles[1])
    full = serial.forward(0, training=False).detach()[torch.from_numpy(rows)]
    got = logits[: band.real]
    want = block_of(full, band, grid.feature_band(layout.roles[2], layout.width))[: band.real]
    padding = float(logits[band.real :].abs().max()) if band.real < band.size else 0.0
    return scaled_error(got, want, full), padding


def _replicas(trainer: Trainer, comm: GridComm, loss: float) -> dict[str, torch.Tensor]:
    """Blocks keyed so that ranks holding a replica of the same block use the same key."""
    coords, model = comm.coords, trainer.model
    _, row_axis, col_axis = model.output.roles
    logits = f"logits/{coords[row_axis]}/{coords[col_axis]}"
    replicas = {logits: trainer.logits(), "loss": torch.tensor(loss)}
    for name, block in placed_parameters(model).items():
        place = block.place
        rows = None if place.rows is None else place.rows.index
        replicas[f"{name}/{rows}/{place.cols.index}"] = block.full().detach()
    return replicas


def run_case(case: Case, comm: GridComm, out: Path) -> None:
    """Train `case` on this rank next to the serial model and save the errors and replicas."""
    config = case.config
    trainer = Trainer(model_grid(config, comm), config)
    reference = _reference(case)
    serial = SerialGCN(reference.graph, config)
    errors = {"loss": 0.0, "grad": 0.0}
    losses = []
    for epoch in range(1, case.epochs + 1):
        loss = trainer.train_epoch(epoch).loss
        losses.append(loss)
        errors["loss"] = max(errors["loss"], abs(loss - serial.train_epoch(epoch)) / abs(loss))
        errors["grad"] = max(errors["grad"], gradient_error(trainer.model, serial))
    rows = reference.rows[order_of_layer_output(config.model.layers - 1)]
    errors["logits"], errors["padding"] = _logits_error(trainer, serial, rows)
    target = out / case.name
    target.mkdir(parents=True, exist_ok=True)
    result = {"errors": errors, "losses": losses, "replicas": _replicas(trainer, comm, loss)}
    torch.save(result, target / f"rank-{comm.rank}.pt")


@contextmanager
def joined_world(env: RankEnv) -> Iterator[None]:
    """This process joined to the test world (gloo, one torch thread) until the block ends."""
    torch.set_num_threads(1)
    join_world(env, "gloo", timedelta(seconds=120))
    try:
        yield
    finally:
        dist.destroy_process_group()


def grid_comm(config: TrainConfig, made: GroupCache) -> GridComm | None:
    """The groups of the run's grid (and its replicas), placed as it says, over the first ranks of the
    test world (None on the ranks beyond them), sharing the groups `made` for earlier grids of the world;
    casting as the run's --comm-dtype says."""
    comm = build_grid_comm(
        config.process_grid, 120, PhaseTimer(CPU), CPU, made, config.minibatch.data_parallel
    )
    return None if comm is None else comm.cast_all_reduces(config.cast_dtype)


def run_world(
    env: RankEnv, cases: Sequence[Any], out: str, run: Callable[[Any, GridComm, Path], None]
) -> None:
    """Entry point of every rank of a test world: `run` each case (anything with a `config`) on the ranks
    its grid needs."""
    made: GroupCache = {}
    with joined_world(env):
        for case in cases:
            comm = grid_comm(case.config, made)
            if comm is not None:
                run(case, comm, Path(out))
