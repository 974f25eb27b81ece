"""load_rank: what one rank of a 3D grid needs, read from a store without loading the whole graph."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gtool.errors import StoreError
from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid, as_grid
from gtool.geometry.layers import XYZ, LayerGeometry, Roles, rank_geometry
from gtool.loader.adjacency import load_adjacency_shard
from gtool.loader.node_rows import read_band, read_rows
from gtool.loader.rank_data import AdjacencyShard, RankData, ReadStats
from gtool.loader.tiles import ReadAhead
from gtool.store import layout
from gtool.store.chunks import block_rows, read_checked
from gtool.store.reader import Store, StoreLike, as_store
from gtool.store.values import first_non_finite_row, id_range_problem, label_problem, split_problem

DEFAULT_WORKERS = 8
DEFAULT_READ_AHEAD_BYTES = 64 << 20


def load_rank(
    store: StoreLike,
    grid: ProcessGrid | Sequence[int],
    rank: int,
    layers: int | Sequence[bool],
    device: torch.device | str = "cpu",
    *,
    storage_options: dict[str, Any] | None = None,
    workers: int = DEFAULT_WORKERS,
    read_ahead_bytes: int = DEFAULT_READ_AHEAD_BYTES,
    start: Roles = XYZ,
    features: bool = True,
    transposes: bool = True,
) -> RankData:
    """Load rank `rank` of a Gx x Gy x Gz grid for a GCN from a store (path, URL or Store); `layers`: the
    layers' orders (True: transform-first, gtool.architecture.ModelConfig.orders), or their number (each
    aggregate-first); `start`: the roles of the first GCN layer (gtool.architecture.ModelConfig.start).

    Reads only the tiles its distinct adjacency shards overlap, `workers` at a time and at most about
    `read_ahead_bytes` (decoded) ahead of their merge, and only its feature, label and split rows.
    Shards are CSR with their CSR transposes, padded to the band sizes. Without `features` the feature
    block is not read (a run reading each step's rows: `read_feature_rows`), without `transposes` the
    shards' transposes are not built and their indices are int32 where they fit (a mini-batch run: its
    cuts read the shards and make their own transposes).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1 (tiles read at once), got {workers}")
    started = time.perf_counter()
    opened = as_store(store, storage_options)
    grid = as_grid(grid)
    n, two = opened.num_nodes, opened.two_matrices
    geometry = rank_geometry(grid, rank, layers, n, opened.num_features, two, start)
    stats = ReadStats()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gtool-tiles") as executor:
        reads = ReadAhead(executor, max_tiles=2 * workers, max_bytes=read_ahead_bytes)
        shards = {
            key: load_adjacency_shard(opened, shard, reads, stats, device, transposes)
            for key, shard in geometry.shards.items()
        }
    order, label_rows = geometry.label_order, geometry.label_rows

    def labels_problem(values: np.ndarray) -> str | None:
        return label_problem(values, opened.num_classes)

    feature_read = NodeRead(
        layout.FEATURES, geometry.feature_rows, geometry.feature_cols, 0, features_problem
    )
    node_reads = (
        NodeRead(layout.LABELS[order], label_rows, None, layout.LABEL_NONE, labels_problem),
        NodeRead(layout.SPLIT[order], label_rows, None, layout.SPLIT_NONE, split_problem),
    )
    labels, split = (read_node_rows(opened, read, stats, device) for read in node_reads)
    block = read_node_rows(opened, feature_read, stats, device) if features else None
    stats.seconds = time.perf_counter() - started
    return RankData(
        grid=grid,
        rank=rank,
        orders=tuple(shard.transform_first for shard in geometry.layers),
        start=start,
        meta=opened.meta,
        shards=shards,
        layer_keys=[shard.key for shard in geometry.layers],
        features=block,
        feature_rows=geometry.feature_rows,
        feature_cols=geometry.feature_cols,
        labels=labels,
        split=split,
        label_rows=geometry.label_rows,
        label_order=order,
        read=stats,
    )


def load_layer_shard(
    store: StoreLike, shard: LayerGeometry, device: torch.device | str = "cpu"
) -> AdjacencyShard:
    """The adjacency shard of one GCN layer as a rank holds it (`load_rank` reads a whole stack's)."""
    opened = as_store(store)
    with ThreadPoolExecutor(max_workers=DEFAULT_WORKERS, thread_name_prefix="gtool-tiles") as executor:
        reads = ReadAhead(executor, max_tiles=2 * DEFAULT_WORKERS, max_bytes=DEFAULT_READ_AHEAD_BYTES)
        return load_adjacency_shard(opened, shard, reads, ReadStats(), device)


def load_feature_block(
    store: StoreLike, rows: Band, cols: Band, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The stored features (pc order) of node band `rows` and feature band `cols`, zero-padded, checked."""
    read = NodeRead(layout.FEATURES, rows, cols, 0, features_problem)
    return read_node_rows(as_store(store), read, ReadStats(), device)


def read_feature_rows(
    store: Store, positions: np.ndarray, cols: Band, stats: ReadStats, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The stored features of the ascending pc `positions` (a mini-batch step's members) in feature band
    `cols`, zero-padded, checked finite, in one selection; adds the bytes and seconds to `stats`."""
    began = time.perf_counter()
    array = store.array(layout.FEATURES)
    rows, nbytes = read_rows(array, positions, cols, store.meta.every_chunk, store.location)
    if problem := features_problem(rows):
        raise StoreError(
            f"{store.location}: array {layout.FEATURES} (a step's rows): {problem}; the store is damaged"
        )
    stats.add_bytes(nbytes)
    stats.seconds += time.perf_counter() - began
    return torch.from_numpy(rows).to(device)


def load_label_rows(
    store: StoreLike, order: str, rows: Band, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The labels and split codes of node band `rows` in order `order` ('r' or 'c'), padded with -1."""
    opened = as_store(store)

    def labels_problem(values: np.ndarray) -> str | None:
        return label_problem(values, opened.num_classes)

    labels = NodeRead(layout.LABELS[order], rows, None, layout.LABEL_NONE, labels_problem)
    split = NodeRead(layout.SPLIT[order], rows, None, layout.SPLIT_NONE, split_problem)
    return read_node_rows(opened, labels, ReadStats(), device), read_node_rows(
        opened, split, ReadStats(), device
    )


def read_positions(store: Store, order: str, ids: np.ndarray) -> np.ndarray:
    """The positions in order `order` of the distinct nodes `ids`, reading perm/`order` one block of rows
    at a time: memory in the ids and one block, never the whole permutation (a residual's reshard)."""
    array, path = store.array(layout.PERMS[order]), layout.PERMS[order]
    ids = np.asarray(ids, dtype=np.int64)
    sorter = np.argsort(ids, kind="stable")
    sorted_ids = ids[sorter]
    positions = np.full(ids.shape[0], -1, dtype=np.int64)
    step = block_rows(array)
    for first in range(0, store.num_nodes if ids.shape[0] else 0, step):
        selection = (slice(first, min(first + step, store.num_nodes)),)
        values = read_checked(array, selection, store.location, every_chunk=store.meta.every_chunk)
        slot = np.minimum(np.searchsorted(sorted_ids, values), ids.shape[0] - 1)
        hit = np.nonzero(sorted_ids[slot] == values)[0]
        positions[sorter[slot[hit]]] = first + hit
    if (missing := np.nonzero(positions < 0)[0]).size:
        node = int(ids[missing[0]])
        raise StoreError(f"{store.location}: array {path} does not place node {node}; the store is damaged")
    return positions


@dataclass(frozen=True)
class NodeRead:
    """A band of a node array to read, the value padding gets, and the check its values must pass."""

    path: str
    rows: Band
    cols: Band | None
    fill: int
    problem: Callable[[np.ndarray], str | None]


def features_problem(block: np.ndarray) -> str | None:
    """Features must be finite."""
    row = first_non_finite_row(block)
    return None if row is None else f"non-finite values (first in row {row} of the band)"


def read_node_rows(
    store: Store, read: NodeRead, stats: ReadStats, device: torch.device | str
) -> torch.Tensor:
    """A padded band of a node array as a tensor on `device`, its values checked, counting the bytes read."""
    array, every_chunk = store.array(read.path), store.meta.every_chunk
    block, nbytes = read_band(array, read.rows, read.cols, read.fill, every_chunk, store.location)
    problem = read.problem(block)
    if problem:
        rows = f"rows {read.rows.start}-{read.rows.stop - 1}"
        raise StoreError(f"{store.location}: array {read.path} ({rows}): {problem}; the store is damaged")
    stats.add_bytes(nbytes)
    return torch.from_numpy(block).to(device)


def read_node_ids(store: Store, order: str, rows: Band) -> np.ndarray:
    """The original node ids of the real rows of band `rows` in order `order` (perm/r or perm/c), checked
    to lie in [0, N): a damaged permutation would put a node's row out of bounds or into another's."""
    path = layout.PERMS[order]
    ids = read_band(store.array(path), rows, None, -1, store.meta.every_chunk, store.location)[0][: rows.real]
    if problem := id_range_problem(ids, store.num_nodes):
        where = f"rows {rows.start}-{rows.start + rows.real - 1}"
        raise StoreError(f"{store.location}: array {path} ({where}): {problem}; the store is damaged")
    return ids
