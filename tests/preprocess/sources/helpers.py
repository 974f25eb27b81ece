"""Shared helpers of the file-source tests: a small R-MAT edge list and reading a source back."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gtool.preprocess.sources.base import GraphSource, check_edge_ids
from gtool.preprocess.sources.generators import RmatSource

RMAT = RmatSource(8, 4)


def rmat_edges() -> tuple[np.ndarray, np.ndarray]:
    """The edges of rmat:8:4 (256 nodes, 1024 edges)."""
    blocks = [chunk.read() for chunk in RMAT.edge_chunks(1 << 20)]
    return np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])


def read_all(
    source: GraphSource, workdir: Path, edges_per_chunk: int = 1 << 20
) -> tuple[np.ndarray, np.ndarray]:
    """Prepare a source, read every chunk (checking ids against its node count) and concatenate."""
    source.prepare(str(workdir))
    blocks = [chunk.read() for chunk in source.edge_chunks(edges_per_chunk)]
    for block in blocks:
        check_edge_ids(block, source.num_nodes())
    return np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])


def multiset(src: np.ndarray, dst: np.ndarray) -> list[tuple[int, int]]:
    """The edges as a sorted list of pairs (a multiset)."""
    return sorted(zip(src.tolist(), dst.tolist(), strict=True))
