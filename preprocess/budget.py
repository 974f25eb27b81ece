"""Memory budget: how big edge chunks and reduce groups may be so the process tree stays within it."""

from __future__ import annotations

from dataclasses import dataclass

from gtool.errors import GtoolError, InputError
from gtool.memory import machine_memory
from gtool.units import human_bytes

MB = 1 << 20
BASELINE_BYTES = 256 * MB
BYTES_PER_NODE = 56
WORKER_BASELINE_BYTES = 128 * MB
WORKER_BYTES_PER_NODE = 8
MAP_BYTES_PER_EDGE = 240
REDUCE_BYTES_PER_ENTRY = 64
MIN_CHUNK_EDGES = 1 << 16
MAX_CHUNK_EDGES = 1 << 21
MIN_GROUP_ENTRIES = 1 << 18
MAX_GROUP_ENTRIES = 1 << 23
BYTES_PER_TILE = 64
"""Per-tile bookkeeping (entry counts of every partition per map task, offsets, tile nnz)."""
SMALL_TILE_GRID = 16
"""Tile grids up to this T (the default: 256 tiles, cheap on any graph) are made whatever the node count."""
FEATURE_ROW_COPIES = 3
"""Copies of a block of feature rows a feature write task holds (read, permuted, encoded)."""
MAX_CHUNK_BYTES = (1 << 31) - 1
"""The most bytes Blosc (the stores' compressor) encodes as one chunk (a feature chunk holds >= 1 row)."""
MIN_FEATURE_PIECE_BYTES = 8 * MB
MAX_FEATURE_PIECE_BYTES = 1 << 30
TASKS_PER_WORKER = 8
"""Work is cut into at least this many tasks per worker (where sizes allow), so workers finish together."""


def default_memory_limit() -> int:
    """A safe share of this machine (its cgroup's limit, if any): half the total memory, at most 80% of
    what is available now."""
    memory = machine_memory()
    return int(min(memory.total * 0.5, memory.available * 0.8))


@dataclass(frozen=True)
class Budget:
    """Sizes derived from a memory limit, a node count, the number of concurrent tasks and the number of
    worker processes in the run's own process tree (each with its interpreter and the O(N) lookups its
    tasks map: two int32 inverse permutations in the map stage, two float32 scale arrays when writing)."""

    limit: int
    num_nodes: int
    concurrency: int
    processes: int = 0
    tiles: int = 1

    @property
    def fixed(self) -> int:
        """Memory that does not depend on the edges: interpreters, libraries, O(N) and O(T^2) arrays."""
        per_process = WORKER_BASELINE_BYTES + WORKER_BYTES_PER_NODE * self.num_nodes
        return self.this_process + BYTES_PER_TILE * self.tiles**2 + self.processes * per_process

    @property
    def this_process(self) -> int:
        """What this process holds whatever the limit: its interpreter and the O(N) arrays."""
        return BASELINE_BYTES + BYTES_PER_NODE * self.num_nodes

    def __post_init__(self) -> None:
        self.check_tile_rows()
        tile_bytes = BYTES_PER_TILE * self.tiles**2
        if tile_bytes > self.limit // 2:
            raise GtoolError(
                f"--tiles {self.tiles}x{self.tiles} makes {self.tiles**2:,} tiles whose bookkeeping alone "
                f"takes about {human_bytes(tile_bytes)}, more than half of --memory-limit "
                f"{human_bytes(self.limit)}: give fewer tiles"
            )
        total = machine_memory().total
        if self.this_process > total:
            raise GtoolError(
                f"{self.num_nodes:,} nodes need about {human_bytes(self.this_process)} in this process (its "
                f"per-node arrays), more than this machine's {human_bytes(total)} of memory, whatever "
                "--memory-limit says"
            )
        self.per_task  # noqa: B018 - a limit too small for this graph fails here, before any work

    def check_tile_rows(self) -> None:
        """Refuse a tile grid over SMALL_TILE_GRID whose rows of tiles reach past the last node (tiles of
        ceil(N / T) rows fill only ceil(N / S) rows of tiles; the rest would be empty, and every tile costs
        files and time: sbm:300:3 --tiles 128x128 took 132 s)."""
        n, t = self.num_nodes, self.tiles
        if n == 0 or t <= SMALL_TILE_GRID:
            return
        size = -(-n // t)
        filled = -(-n // size)
        if filled < t:
            raise GtoolError(
                f"--tiles {t}x{t} of a graph of {n:,} nodes: tiles of {size:,} rows fill only {filled:,} "
                f"rows of tiles, so the last {t - filled:,} would be empty (each tile costs files and time); "
                f"give --tiles {filled}x{filled}"
            )

    def check_feature_width(self, num_features: int, where: str) -> None:
        """Fail when one feature row is too wide for a chunk or for a task's share of the budget."""
        if 4 * num_features > MAX_CHUNK_BYTES:
            raise InputError(
                where,
                f"{num_features:,} features per node: a row of float32 is more than the "
                f"{MAX_CHUNK_BYTES:,} bytes a store chunk may hold",
            )
        row_bytes = FEATURE_ROW_COPIES * 4 * num_features
        if row_bytes > self.per_task:
            raise InputError(
                where,
                f"{num_features:,} features per node: writing one row takes about {human_bytes(row_bytes)}, "
                f"more than the {human_bytes(self.per_task)} a task may use under --memory-limit "
                f"{human_bytes(self.limit)}",
            )

    @property
    def per_task(self) -> int:
        spare = self.limit - self.fixed
        if spare < 64 * MB * self.concurrency:
            need = self.fixed + 64 * MB * self.concurrency
            raise GtoolError(
                f"--memory-limit {human_bytes(self.limit)} is too small for {self.num_nodes:,} nodes with "
                f"{self.concurrency} workers: give at least {human_bytes(need, up=True)} or fewer --workers"
            )
        return spare // self.concurrency

    def edges_per_chunk(self) -> int:
        """Edges one map task reads at a time."""
        return int(min(MAX_CHUNK_EDGES, max(MIN_CHUNK_EDGES, self.per_task // MAP_BYTES_PER_EDGE)))

    def group_entries(self, total: int = 0) -> int:
        """Most entries one reduce task sorts at a time: what the budget allows, and no more than keeps
        TASKS_PER_WORKER tasks for every worker when `total` entries are to be sorted."""
        allowed = min(MAX_GROUP_ENTRIES, self.per_task // REDUCE_BYTES_PER_ENTRY)
        if total:
            allowed = min(allowed, total // (TASKS_PER_WORKER * self.concurrency))
        return int(max(MIN_GROUP_ENTRIES, allowed))

    def feature_piece_bytes(self, total: int) -> int:
        """Bytes of features one task permuting them holds (a block as read, or a bucket being assembled,
        with a slice of a block beside it): half its share, and no more than keeps TASKS_PER_WORKER tasks
        for every worker when `total` bytes are to be permuted."""
        allowed = min(
            MAX_FEATURE_PIECE_BYTES, self.per_task // 2, total // (TASKS_PER_WORKER * self.concurrency)
        )
        return int(max(MIN_FEATURE_PIECE_BYTES, allowed))
