"""Out-of-core preprocessing: raw graph -> 2D-tiled Zarr store."""
