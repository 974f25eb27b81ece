"""3D-parallel GCN training (Plexus) over torch.distributed: `gtool train` and `gtool predict`.

config        what a run is told (TrainConfig); read by the command line without torch
launch/       starting ranks: torchrun/srun environments, local processes, joining the grid
comm/         the grid's process groups, their timed collectives, phase timing
nn/           the 3D-parallel building blocks: SpMM and GEMM products, sharded blocks, dropout, loss
models/       models built from the blocks, and their serial twins
minibatch/    mini-batch samples cut by each rank from its own shards
fit/          one rank's training: steps, epochs, optimizer, reports
checkpoints/  sharded checkpoints, and their parameters on any grid
predict/      a checkpoint's forward pass on any grid, written in the original node order
"""
