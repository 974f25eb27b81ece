"""3D-parallel GCN training (Plexus) over torch.distributed: `gtool train`.

train(TrainConfig(store, grid=(2, 2, 2), ...))      a whole run: local processes, or torchrun/srun ranks
run_rank(RankEnv, TrainConfig)                      what one rank of a run does
Trainer(RankData, GridComm, TrainConfig, device)    one rank's model, loss and optimizer, epoch by epoch
SerialGCN(SerialGraph, TrainConfig)                 the single-process reference model
"""

from gtool.trainer.config import TrainConfig
from gtool.trainer.launch import RankEnv, RankFailed
from gtool.trainer.loop import Trainer, fit
from gtool.trainer.run import run_rank, train
from gtool.trainer.serial import SerialGCN, SerialGraph

__all__ = [
    "RankEnv",
    "RankFailed",
    "SerialGCN",
    "SerialGraph",
    "TrainConfig",
    "Trainer",
    "fit",
    "run_rank",
    "train",
]
