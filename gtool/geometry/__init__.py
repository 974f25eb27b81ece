"""Index geometry shared by every room: no I/O, no torch; integers, ranges and numpy arrays.

bands        a dimension cut into g equal, padded bands
tiles        the T x T tiling of a store and the cut of a tile to a rectangle
grid         the GX x GY x GZ process grid: rank coordinates and axis groups
layers       what each rank holds in each layer (roles, shards, blocks) on a grid
shapes       the grids of P ranks and each layer's padded block shapes on one
collectives  every collective of a training step: its group, kind and operand size
bandnnz      every rank's shard nonzeros per layer, from nonzeros counted in cells
epochs       a mini-batch epoch in steps and rounds
"""
