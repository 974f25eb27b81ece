"""The record of one sharding run: what `gtool shard` prints at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def tile_stats(tile_nnz: np.ndarray) -> dict:
    """min / max / mean / max-over-mean / coefficient of variation / empty tiles, plus the T x T counts."""
    flat = tile_nnz.ravel().astype(np.float64)
    mean = float(flat.mean()) if flat.size else 0.0
    return {
        "min": int(flat.min()),
        "max": int(flat.max()),
        "mean": mean,
        "max_over_mean": float(flat.max() / mean) if mean else 0.0,
        "cv": float(flat.std() / mean) if mean else 0.0,
        "empty": int((flat == 0).sum()),
        "tile_nnz": tile_nnz.astype(int).tolist(),
    }


@dataclass
class ShardSummary:
    """Figures of a finished run."""

    store: str
    source: str
    num_nodes: int
    input_edges: int
    nnz: dict[int, int]
    tiles: int
    stats: dict[int, dict]
    seconds: float
    bytes_written: int
    peak_rss_mb: float
    stage_seconds: dict[str, float] = field(default_factory=dict)
