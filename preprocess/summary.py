"""The record of one sharding run: what `gtool shard` prints at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from gtool.preprocess.sources.cache.extraction import Preparation
from gtool.store.metadata import MatrixStats


@dataclass
class ShardSummary:
    """Figures of a finished run."""

    store: str
    source: str
    num_nodes: int
    input_edges: int
    nnz: dict[int, int]
    tiles: int
    stats: dict[int, MatrixStats]
    seconds: float
    bytes_written: int
    peak_rss_mb: float
    spill_peak_bytes: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    prepared: Preparation | None = None
