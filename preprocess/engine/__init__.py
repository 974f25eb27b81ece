"""How a run executes: the Dask cluster and its stages, lost work, signals, per-stage I/O counts, high-water
marks, and threads of the `gtool` process for its O(N) passes."""
