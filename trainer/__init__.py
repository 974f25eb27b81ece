"""3D-parallel GCN training (Plexus) over torch.distributed: `gtool train`.

run.train(TrainConfig.of(store, (2, 2, 2), ...))      a whole run: local processes, or torchrun/srun ranks
run.run_rank(RankEnv, TrainConfig)                   what one rank of a run does
loop.Trainer(RankData, GridComm, TrainConfig, dev)   one rank's model, loss and optimizer, epoch by epoch
serial.SerialGCN(SerialGraph, TrainConfig)           the single-process reference model

Importing the package loads nothing else: the command line reads gtool.trainer.config without torch.
"""
