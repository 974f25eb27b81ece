"""Edges of a generator made in fixed blocks, each a pure function of its index, grouped into chunks."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

import numpy as np

from gtool.geometry.bands import ceil_div
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk

GENERATOR_BLOCK = 1 << 20
"""Edges per generator block."""


@dataclass(frozen=True)
class BlockedChunk(EdgeChunk):
    """Generator blocks [first, last) of `edges` edges cut into GENERATOR_BLOCK-edge blocks, each a pure
    function of its index: the graph never depends on how blocks are grouped into chunks."""

    edges: int
    first: int
    last: int

    @abstractmethod
    def block(self, index: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """`count` edges (src, dst) of generator block `index`."""

    @abstractmethod
    def name(self) -> str:
        """The generator spec, for error messages."""

    def read(self) -> EdgeBlock:
        parts = [
            self.block(b, min(GENERATOR_BLOCK, self.edges - b * GENERATOR_BLOCK))
            for b in range(self.first, self.last)
        ]
        src = np.concatenate([p[0] for p in parts])
        dst = np.concatenate([p[1] for p in parts])
        return EdgeBlock(src, dst, where=f"{self.name()} blocks {self.first}-{self.last}")


def block_ranges(edges: int, edges_per_chunk: int) -> list[tuple[int, int]]:
    """Generator block ranges [first, last) of about `edges_per_chunk` edges (one block at least)."""
    blocks = ceil_div(edges, GENERATOR_BLOCK)
    per = max(1, edges_per_chunk // GENERATOR_BLOCK)
    return [(b, min(b + per, blocks)) for b in range(0, blocks, per)]
