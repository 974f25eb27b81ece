"""Mini-batch runs inside one spawned world, each next to nothing but its own ranks: every rank of a run
trains its part and the first rank writes the per-step losses, per replica, of every epoch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from gtool.store.reader import open_store
from gtool.trainer.checkpoints.files import Checkpoints
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.loop import checkpoint_shape
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.models.serial import SerialGCN, SerialSample, torch_csr
from tests.support.reference import rescaled_subgraph
from tests.trainer.cases import CPU
from tests.trainer.references import unpermuted_reference


@dataclass(frozen=True)
class MiniBatchCase:
    """`config` trained for `epochs` epochs; with `resume_after`, a second trainer resumes from the
    checkpoint the first wrote after that epoch and trains the rest."""

    name: str
    config: TrainConfig
    epochs: int
    resume_after: int | None = None


def _trainer(case: MiniBatchCase, comm: GridComm) -> Trainer:
    config = case.config
    return Trainer(model_grid(config, comm), config)


def _train(trainer: Trainer, epochs: range) -> tuple[list, dict[str, float]]:
    """The per-step losses of `epochs`, then the scores of an evaluation."""
    try:
        return [trainer.train_epoch(epoch).step_losses for epoch in epochs], trainer.evaluate()
    finally:
        trainer.close()


def run_case(case: MiniBatchCase, comm: GridComm, out: Path) -> None:
    """Train `case` on this rank; its first rank saves {"losses": [per epoch, per replica, per round],
    "scores": the evaluation after the last epoch}."""
    last = case.epochs
    if case.resume_after is None:
        losses, scores = _train(_trainer(case, comm), range(1, last + 1))
    else:
        first = _trainer(case, comm)
        losses, _ = _train(first, range(1, case.resume_after + 1))
        checkpoints = Checkpoints(str(out / f"{case.name}-checkpoints"), comm, checkpoint_shape(first))
        checkpoints.save(case.resume_after, first.state(), {})
        second = _trainer(case, comm)
        second.load_state(checkpoints.load(checkpoints.latest(), CPU))
        more, scores = _train(second, range(case.resume_after + 1, last + 1))
        losses += more
    if comm.everyone.index == 0:
        torch.save({"losses": losses, "scores": scores}, out / f"{case.name}.pt")


def serial_losses(config: TrainConfig, epochs: int) -> list[list[list[float | None]]]:
    """The per-step losses of the serial model on the unpermuted graph, each round's update from the mean
    of its replicas' gradients: [epoch][replica][round], None where a replica has no step."""
    reference = unpermuted_reference(config.store, config.model.layers, config.torch_dtype)
    adjacency = sp.csr_matrix(reference.graph.matrices[0][0].to_dense().numpy())
    serial = SerialGCN(reference.graph, config)
    replicas = config.minibatch.data_parallel
    minibatch = config.minibatch
    schedule = Schedule.of(open_store(config.store), minibatch.batch_size, replicas, minibatch.sampling)
    result = []
    for epoch in range(1, epochs + 1):
        order = schedule.order(config.runtime.seed, epoch)
        by_replica: list[list[float | None]] = [[] for _ in range(replicas)]
        for round_index in range(schedule.rounds):
            steps = [schedule.step_of(round_index, replica) for replica in range(replicas)]
            samples = []
            for step in steps:
                if step is not None:
                    nodes = schedule.sample(order, step)
                    subgraph = rescaled_subgraph(adjacency, nodes.numpy().astype(np.int64))
                    pair = (
                        torch_csr(subgraph, config.torch_dtype),
                        torch_csr(subgraph.T, config.torch_dtype),
                    )
                    samples.append(SerialSample(nodes, pair, step))
            losses = iter(serial.train_round(epoch, samples))
            for replica, step in enumerate(steps):
                by_replica[replica].append(None if step is None else next(losses))
        result.append(by_replica)
    return result
