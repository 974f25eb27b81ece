"""The record of one sharding run: what `gtool shard` prints at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from gtool.preprocess.engine.iostats import StageIO
from gtool.preprocess.sources.cache.record import Preparation
from gtool.store.metadata import MatrixStats


@dataclass(frozen=True)
class ShardSummary:
    """Figures of a finished run, made once it is published."""

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
    stage_io: dict[str, StageIO] = field(default_factory=dict)
    concurrency: int = 1

    def busy_seconds(self, stage: str) -> float:
        """Seconds the cluster spent on a stage's tasks: their summed run time over the tasks at once."""
        return self.stage_io[stage].task_seconds / max(1, self.concurrency)
