"""What each rank of the prediction tests' spawned world does: train a model with checkpoints on one grid,
then predict from its checkpoint on other grids (predict.forward.predict_on), all in one world."""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from gtool.trainer.comm.groups import GroupCache
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.loop import fit
from gtool.trainer.fit.report import Reporter
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.predict.forward import predict_on
from gtool.trainer.predict.job import prediction_job
from tests.trainer.cases import CPU, grid_comm, joined_world


@dataclass(frozen=True)
class Training:
    """Train `config` (--checkpoint and --log set), then predict from its checkpoint into each output of
    `predictions`: output folder -> (grid, whether to write embeddings too)."""

    config: TrainConfig
    predictions: dict[str, tuple[tuple[int, int, int], bool]]


def run_trainings(env: RankEnv, trainings: list[Training]) -> None:
    """Entry point of every rank of the test world."""
    made: GroupCache = {}
    with joined_world(env):
        for training in trainings:
            config = training.config
            comm = grid_comm(config, made)
            if comm is not None:
                reporter = Reporter(comm.rank == 0, config.runtime.log, append=False)
                fit(Trainer(model_grid(config, comm), config), reporter, CPU)
            dist.barrier()  # the checkpoint is complete before any rank reads it
            for output, (grid, embeddings) in training.predictions.items():
                job = prediction_job(  # the last epoch's model, which the tests' references train to
                    config.store,
                    config.runtime.checkpoint,
                    output,
                    grid,
                    config.runtime,
                    embeddings,
                    use="latest",
                )
                dist.barrier()  # every rank checked that the output is not there yet
                comm = grid_comm(job.config, made)
                if comm is not None:
                    predict_on(comm, job, CPU, Reporter(False, None, False))
