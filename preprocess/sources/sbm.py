"""`sbm:NODES:CLASSES[:DEGREE[:SEED]]`: a stochastic block model with planted classes, a graph that can be
learned (the README's demo), generated out of core in fixed blocks like R-MAT.

Node v belongs to class v * CLASSES // NODES (`gtool shard` permutes them anyway). Each edge starts at a
uniform random node and ends, with probability SBM_HOMOPHILY, at a random node of the same class, else at
any node. Features are uniform noise in (-0.5, 0.5] plus SBM_SIGNAL on the columns c with
c % CLASSES == class: one node's features say little about its class, their average over its neighbours
(most of them of its class), as a GCN takes it, says a lot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.base import FeatureSource, GraphSource, NodeData
from gtool.preprocess.sources.blocks import BlockedChunk, block_ranges
from gtool.preprocess.sources.kinds import SBM_SPEC
from gtool.preprocess.sources.nodes.generated import random_split, uniform_rows

SBM_FEATURES = 32
SBM_HOMOPHILY = 0.8
SBM_SIGNAL = 0.03
DEFAULT_DEGREE = 10
DEFAULT_SEED = 1


def sbm_classes(nodes: np.ndarray, num_nodes: int, num_classes: int) -> np.ndarray:
    """The planted class of each node id."""
    return nodes.astype(np.int64) * num_classes // num_nodes


def sbm_block(
    num_nodes: int, num_classes: int, seed: int, index: int, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """`count` edges of generator block `index`: src uniform, dst in src's class with SBM_HOMOPHILY."""
    rng = np.random.default_rng([seed, 0x5B3, index])
    src = rng.integers(0, num_nodes, size=count, dtype=np.int64)
    cls = sbm_classes(src, num_nodes, num_classes)
    lo = -(-cls * num_nodes // num_classes)  # first node of the class: ceil(c * N / K)
    hi = -(-(cls + 1) * num_nodes // num_classes)
    inside = lo + (rng.random(count) * (hi - lo)).astype(np.int64)
    anywhere = rng.integers(0, num_nodes, size=count, dtype=np.int64)
    dst = np.where(rng.random(count) < SBM_HOMOPHILY, inside, anywhere)
    return src, dst


@dataclass(frozen=True)
class SbmChunk(BlockedChunk):
    """Generator blocks [first, last) of a stochastic block model."""

    num_nodes: int
    num_classes: int
    seed: int

    def block(self, index: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        return sbm_block(self.num_nodes, self.num_classes, self.seed, index, count)

    def name(self) -> str:
        return f"sbm:{self.num_nodes}:{self.num_classes}"


class PlantedFeatures(FeatureSource):
    """Uniform noise plus SBM_SIGNAL on the columns of the node's class, a pure function of (seed, node)."""

    def __init__(self, num_nodes: int, num_classes: int, seed: int):
        self.num_features = SBM_FEATURES
        self.num_nodes, self.num_classes, self.seed = num_nodes, num_classes, seed
        self.where = f"sbm features (F={SBM_FEATURES}, signal {SBM_SIGNAL}, seed={seed})"

    @property
    def num_rows(self) -> int:
        return self.num_nodes

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        values = uniform_rows(rows, SBM_FEATURES, self.seed) - np.float32(0.5)
        cls = sbm_classes(rows, self.num_nodes, self.num_classes)
        values += SBM_SIGNAL * (np.arange(SBM_FEATURES)[None, :] % self.num_classes == cls[:, None])
        return values


class SbmSource(GraphSource):
    """NODES nodes in CLASSES planted classes, NODES * DEGREE / 2 generated edges (mean degree ~DEGREE)."""

    def __init__(
        self, num_nodes: int, num_classes: int, degree: int = DEFAULT_DEGREE, seed: int = DEFAULT_SEED
    ):
        if num_nodes < 2 or not 2 <= num_classes <= min(num_nodes, SBM_FEATURES) or degree < 1 or seed < 0:
            raise InputError(
                "sbm",
                f"expected NODES >= 2, 2 <= CLASSES <= min(NODES, {SBM_FEATURES}), DEGREE >= 1 and "
                f"SEED >= 0, got {num_nodes}:{num_classes}:{degree}:{seed}",
            )
        self.num_classes, self.degree, self.seed = num_classes, degree, seed
        self._num_nodes = num_nodes
        self.edges = num_nodes * degree // 2
        self.name = f"sbm:{num_nodes}:{num_classes}:{degree}"

    def num_nodes(self) -> int:
        return self._num_nodes

    def edge_count(self) -> int:
        return self.edges

    def edge_chunks(self, edges_per_chunk: int) -> list[SbmChunk]:
        n, k = self._num_nodes, self.num_classes
        return [
            SbmChunk(self.edges, first, last, num_nodes=n, num_classes=k, seed=self.seed)
            for first, last in block_ranges(self.edges, edges_per_chunk)
        ]

    def node_data(self) -> NodeData:
        n = self._num_nodes
        return NodeData(
            features=PlantedFeatures(n, self.num_classes, self.seed),
            labels=sbm_classes(np.arange(n), n, self.num_classes),
            split=random_split(n, self.seed),
            num_classes=self.num_classes,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "generator": "sbm",
            "num_nodes": self._num_nodes,
            "classes": self.num_classes,
            "degree": self.degree,
            "seed": self.seed,
            "edges": self.edges,
            "homophily": SBM_HOMOPHILY,
            "features": SBM_FEATURES,
            "signal": SBM_SIGNAL,
        }


def spec_numbers(spec: str, args: str, counts: range, expected: str) -> list[int]:
    """The colon-separated integers `args` of generator spec `spec`, as many as `counts` allows, else an
    InputError saying the `expected` form."""
    try:
        nums = [int(a) for a in args.split(":")]
    except ValueError:
        nums = []
    if len(nums) not in counts:
        raise InputError(spec, f"not a generator spec; expected {expected}")
    return nums


def parse_sbm(spec: str, args: str) -> SbmSource:
    """`sbm:NODES:CLASSES[:DEGREE[:SEED]]` as a source."""
    return SbmSource(*spec_numbers(spec, args, range(2, 5), SBM_SPEC))
