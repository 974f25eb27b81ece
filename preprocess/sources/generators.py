"""Built-in graph generators: R-MAT (Graph500 Kronecker) and 2D lattices, generated chunk by chunk.

R-MAT edges come in fixed generator blocks seeded by (seed, block) (sources/blocks.py), so the graph never
depends on how the pipeline groups blocks into chunks, and scale 26 never holds its edge list in memory.
The stochastic block model with planted classes (`sbm:...`, the demo that learns) is in sources/sbm.py, its
multi-label variant (`sbm-multi:...`) in sources/sbm_tasks.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk, GraphSource
from gtool.preprocess.sources.blocks import BlockedChunk, block_ranges
from gtool.preprocess.sources.kinds import GRID_SPEC, RMAT_SPEC
from gtool.preprocess.sources.sbm import parse_sbm
from gtool.preprocess.sources.sbm_tasks import parse_sbm_tasks

RMAT_A, RMAT_B, RMAT_C = 0.57, 0.19, 0.19
DEFAULT_GENERATOR_SEED = 1


RMAT_BITS_PER_PASS = 8
"""Bits of every edge set per pass over a block: the draws of that many bits are held at once (2 bytes per
edge each)."""


def rmat_block(scale: int, seed: int, block: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` R-MAT edges of generator block `block` (vertices in generator order, unscrambled): bit k of
    an edge is drawn as the k-th uint16 array of the block's generator."""
    from gtool.preprocess.kernels.rmat import set_bits

    rng = np.random.default_rng([seed, block])
    src = np.zeros(count, dtype=np.int64)
    dst = np.zeros(count, dtype=np.int64)
    quadrants = (RMAT_A, RMAT_A + RMAT_B, RMAT_A + RMAT_B + RMAT_C)
    thresholds = tuple(np.uint16(round(p * 65536)) for p in quadrants)
    draws = np.empty((min(RMAT_BITS_PER_PASS, scale), count), dtype=np.uint16)
    for first in range(0, scale, RMAT_BITS_PER_PASS):
        bits = min(RMAT_BITS_PER_PASS, scale - first)
        for k in range(bits):
            draws[k] = rng.integers(0, 1 << 16, size=count, dtype=np.uint16)
        set_bits(draws[:bits], first, thresholds, src, dst)
    return src, dst


@dataclass(frozen=True)
class RmatChunk(BlockedChunk):
    """Generator blocks [first, last) of an R-MAT graph."""

    scale: int
    seed: int

    def block(self, index: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        return rmat_block(self.scale, self.seed, index, count)

    def name(self) -> str:
        return f"rmat:{self.scale}"


class RmatSource(GraphSource):
    """`rmat:SCALE[:EDGEFACTOR[:SEED]]`: 2^SCALE vertices, EDGEFACTOR * 2^SCALE generated edges."""

    def __init__(self, scale: int, edge_factor: int = 16, seed: int = DEFAULT_GENERATOR_SEED):
        if not 1 <= scale <= 40 or edge_factor < 1 or seed < 0:
            raise InputError(
                "rmat",
                f"expected 1 <= SCALE <= 40, EDGEFACTOR >= 1 and SEED >= 0, got {scale}:{edge_factor}:{seed}",
            )
        self.scale, self.edge_factor, self.seed = scale, edge_factor, seed
        self.edges = edge_factor << scale
        self.name = f"rmat:{scale}:{edge_factor}"

    def num_nodes(self) -> int:
        return 1 << self.scale

    def edge_count(self) -> int:
        return self.edges

    def edge_chunks(self, edges_per_chunk: int) -> list[RmatChunk]:
        return [
            RmatChunk(self.edges, first, last, scale=self.scale, seed=self.seed)
            for first, last in block_ranges(self.edges, edges_per_chunk)
        ]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "generator": "rmat",
            "scale": self.scale,
            "edge_factor": self.edge_factor,
            "seed": self.seed,
            "edges": self.edges,
            "abc": [RMAT_A, RMAT_B, RMAT_C],
        }


@dataclass(frozen=True)
class GridChunk(EdgeChunk):
    """Lattice rows [first, last): each node links to its right and lower neighbour."""

    rows: int
    cols: int
    first: int
    last: int

    def read(self) -> EdgeBlock:
        r = np.arange(self.first, self.last, dtype=np.int64)[:, None]
        c = np.arange(self.cols, dtype=np.int64)[None, :]
        node = r * self.cols + c
        right_src = node[:, :-1].ravel()
        down = node[r[:, 0] < self.rows - 1]
        src = np.concatenate([right_src, down.ravel()])
        dst = np.concatenate([right_src + 1, down.ravel() + self.cols])
        return EdgeBlock(src, dst, where=f"grid:{self.rows}x{self.cols} rows {self.first}-{self.last}")


class GridSource(GraphSource):
    """`grid:RxC`: an R x C 2D lattice in row-major order (a stand-in for road networks)."""

    def __init__(self, rows: int, cols: int):
        if rows < 1 or cols < 1:
            raise InputError("grid", f"expected positive R and C, got {rows}x{cols}")
        self.rows, self.cols = rows, cols
        self.name = f"grid:{rows}x{cols}"

    def num_nodes(self) -> int:
        return self.rows * self.cols

    def edge_count(self) -> int:
        return self.rows * (self.cols - 1) + (self.rows - 1) * self.cols

    def edge_chunks(self, edges_per_chunk: int) -> list[GridChunk]:
        per = max(1, edges_per_chunk // max(1, 2 * self.cols))
        return [GridChunk(self.rows, self.cols, r, min(r + per, self.rows)) for r in range(0, self.rows, per)]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "generator": "grid", "rows": self.rows, "cols": self.cols}


def parse_generator(spec: str) -> GraphSource | None:
    """A generator source for 'rmat:...', 'grid:...', 'sbm:...' or 'sbm-multi:...', or None if `spec` names
    no generator."""
    kind, _, args = spec.partition(":")
    if kind not in ("rmat", "grid", "sbm", "sbm-multi") or not args:
        return None
    if kind == "sbm":
        return parse_sbm(spec, args)
    if kind == "sbm-multi":
        return parse_sbm_tasks(spec, args)
    try:
        if kind == "rmat":
            nums = [int(a) for a in args.split(":")]
            if not 1 <= len(nums) <= 3:
                raise ValueError
            return RmatSource(*nums)
        rows, cols = (int(a) for a in args.lower().split("x"))
        return GridSource(rows, cols)
    except ValueError:
        expected = RMAT_SPEC if kind == "rmat" else GRID_SPEC
        raise InputError(spec, f"not a generator spec; expected {expected}") from None
