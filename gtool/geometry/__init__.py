"""Index geometry shared by every room: no I/O, no torch, only integers and ranges.

bands        a dimension cut into g equal, padded bands
tiles        the T x T tiling of a store and the cut of a tile to a rectangle
grid         the GX x GY x GZ process grid: rank coordinates and axis groups
layers       what each rank holds in each layer (roles, shards, blocks) on a grid
collectives  the names of the groups and kinds of the collectives the trainer issues
"""
