"""Out-of-core preprocessing: raw graph -> 2D-tiled Zarr store.

pipeline drives the stages: sources/ read the input, edges/ map and reduce the edges into tiles, nodes/
write the node arrays, all as tasks of engine/, into the store of output/; compiled/ holds the kernels of
the hot loops, spill the intermediate files between stages."""
