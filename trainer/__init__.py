"""3D-parallel GCN training (Plexus) over torch.distributed: `gtool train` and `gtool predict`.

config        what a run is told (TrainConfig); read by the command line without torch
launch/       starting ranks: torchrun/srun environments, local processes, joining the grid
comm/         the grid's process groups, their timed collectives, phase timing
nn/           the 3D-parallel building blocks: SpMM and GEMM products, sharded blocks, dropout, loss
models/       models built from the blocks, and their serial twins; the Python API's Grid and blocks
minibatch/    mini-batch samples cut by each rank from its own shards
fit/          one rank's training: steps, epochs, optimizer, reports
checkpoints/  sharded checkpoints, and their parameters on any grid
predict/      a checkpoint's forward pass on any grid, written in the original node order
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.faces import face

if TYPE_CHECKING:
    from gtool.trainer.comm.groups import GroupCache, grid_comm
    from gtool.trainer.comm.timing import PhaseTimer
    from gtool.trainer.config import MiniBatchConfig, OptimizerConfig, RuntimeConfig, TrainConfig
    from gtool.trainer.fit.launching import started_ranks
    from gtool.trainer.fit.train import train
    from gtool.trainer.fit.trainer import Trainer, model_grid
    from gtool.trainer.launch.environment import RankEnv, environment_rank
    from gtool.trainer.launch.failures import RankFailed
    from gtool.trainer.launch.hugepages import enable_huge_pages
    from gtool.trainer.launch.local import launch_local, refuse_beyond_memory, run_local
    from gtool.trainer.launch.numba_start import start_numba
    from gtool.trainer.launch.rendezvous import tell_peers
    from gtool.trainer.launch.world import join_world, rank_device
    from gtool.trainer.models.blocks import (
        Bias,
        CrossEntropy,
        Dropout,
        GCNConv,
        Linear,
        NormReluDropout,
        Skip,
    )
    from gtool.trainer.models.features import Features
    from gtool.trainer.models.grid import Grid, Layout, Step
    from gtool.trainer.models.network import Network, build_network
    from gtool.trainer.models.stack import Stack, gcn, scalegnn
    from gtool.trainer.nn.dropout import MaskSpec, cuda_notice, relu_dropout
    from gtool.trainer.predict.job import checkpoint_model, prediction_job
    from gtool.trainer.predict.job import predict as run_prediction

__getattr__, __dir__ = face(__name__)
