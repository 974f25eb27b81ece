"""Options of a sharding run (what `gtool shard` flags map to)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ShardOptions:
    """Everything that controls how a source becomes a store."""

    tiles: int = 16
    directed: bool = False
    norm: str = "sym"
    perm: str = "double"
    seed: int = 0
    num_nodes: int | None = None
    features: str | None = None
    labels: str | None = None
    split: str | None = None
    num_features: int = 128
    num_classes: int | None = None
    """The class count of the labels; without labels, how many degree-quantile classes to make."""
    root: str | None = None
    memory_limit: int | None = None
    workers: int | None = None
    scheduler: str | None = None
    spill_dir: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    chunk_edges: int | None = None
    overwrite: bool = False
    progress: bool = False
    worker_timeout: float = 60.0
    """Seconds without a heartbeat after which a Dask worker is taken for stalled and restarted."""
    dashboard: bool = False
    """Run the embedded cluster's Dask dashboard (an external cluster's is linked when it runs one)."""
