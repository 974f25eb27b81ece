"""A user's seat on the 3D grid (the Python API, docs/python.md): the rank's groups, its store, and the
layouts activations take as they flow through a stack of blocks (`models.blocks`).

A `Layout` names an activation block by the roles (a, b, c) its next operation plays: the block holds
rows of node band b, in node order `order` ('r' or 'c', the store's two permutations), and columns of
feature band c of `width`, and is replicated over the a-axis (docs/3d-gcn.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gtool.geometry.bands import Band, band
from gtool.geometry.grid import ProcessGrid, as_grid
from gtool.geometry.layers import XYZ, Roles
from gtool.loader import AdjacencyShard, load_feature_block, load_label_rows, read_node_ids, read_positions
from gtool.store.reader import Store, StoreLike, as_store
from gtool.trainer.comm.groups import AxisGroup, GridComm, grid_comm
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.launch.environment import RankEnv, environment_rank
from gtool.trainer.launch.world import join_world
from gtool.trainer.nn.loss import Targets


@dataclass(frozen=True)
class Layout:
    """An activation block's layout: the roles of the operation it feeds, its node order and width."""

    roles: Roles
    order: str
    width: int


class Grid:
    """One rank's part of a grid of ranks training on a store: made by `Grid.join` on every rank."""

    def __init__(self, comm: GridComm, store: Store, dtype: torch.dtype, device: torch.device, seed: int):
        self.comm = comm
        self.store = store
        self.dtype = dtype
        self.device = device
        self.seed = seed
        self.epoch = 0
        self.num_nodes = store.num_nodes
        self.two_matrices = store.two_matrices
        self.shards: dict[tuple, AdjacencyShard] = {}
        self._keys = 0

    @classmethod
    def join(
        cls,
        store: StoreLike,
        shape: tuple[int, int, int],
        env: RankEnv | None = None,
        *,
        dtype: torch.dtype = torch.float32,
        seed: int = 0,
        backend: str = "gloo",
        timeout_s: float = 300,
    ) -> Grid:
        """Join the process group of `env` (a local launch's, `run_local`) or of torchrun/srun's environment
        (None) and make the groups of a `shape` grid over its ranks; CPU tensors of `dtype`."""
        env = environment_rank() if env is None else env
        if env is None:
            raise ValueError("Grid.join: no rank environment: start the ranks with run_local or torchrun")
        grid = as_grid(shape)
        if env.world_size != grid.size:
            raise ValueError(
                f"Grid.join: a {grid} grid needs {grid.size} ranks, the world has {env.world_size}"
            )
        join_world(env, backend, timedelta(seconds=timeout_s))
        device = torch.device("cpu")
        comm = grid_comm(grid, timeout_s, PhaseTimer(device), device)
        return cls(comm, as_store(store), dtype, device, seed)

    def close(self) -> None:
        """Leave the process group."""
        dist.destroy_process_group()

    def __enter__(self) -> Grid:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def grid(self) -> ProcessGrid:
        return self.comm.grid

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def coords(self) -> tuple[int, int, int]:
        return self.comm.coords

    def axis(self, axis: int) -> AxisGroup:
        return self.comm.axes[axis]

    def node_band(self, axis: int) -> Band:
        """This rank's band of the nodes along grid axis `axis`."""
        return band(self.coords[axis], self.grid.dims[axis], self.num_nodes)

    def feature_band(self, axis: int, width: int) -> Band:
        """This rank's band of `width` columns along grid axis `axis`."""
        return band(self.coords[axis], self.grid.dims[axis], width)

    def next_key(self) -> int:
        """A block's own number, in construction order (every rank builds the same stack)."""
        self._keys += 1
        return self._keys - 1

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose dropout masks the blocks draw next."""
        self.epoch = epoch

    @property
    def input(self) -> Layout:
        """The layout of the stored features (`features()`): roles (x, y, z), pc order."""
        return Layout(XYZ, "c", self.store.num_features)

    def other_order(self, order: str) -> str:
        """The node order after an adjacency product (the same one on a single-permuted store)."""
        if not self.two_matrices:
            return order
        return "c" if order == "r" else "r"

    def features(self) -> torch.Tensor:
        """This rank's block of the stored features, in the layout `input`."""
        rows, cols = self.node_band(XYZ[1]), self.feature_band(XYZ[2], self.store.num_features)
        return load_feature_block(self.store, rows, cols, self.device).to(self.dtype)

    def targets(self, layout: Layout) -> Targets:
        """The labels and splits of the rows of logits in `layout` (its width: the classes)."""
        classes = self.store.num_classes
        if layout.width != classes:
            raise ValueError(
                f"logits need {classes} columns (the store's classes), the layout has {layout.width}"
            )
        _, b, c = layout.roles
        rows, class_band = self.node_band(b), self.feature_band(c, classes)
        labels, split = load_label_rows(self.store, layout.order, rows, self.device)
        first = class_band.index * class_band.size
        real = max(0, min(class_band.size, classes - first))
        return Targets(labels, split, first, real, self.axis(b), self.axis(c))

    def positions(self, order: str, rows: Band, other: str) -> torch.Tensor:
        """The positions in order `other` of the real rows of band `rows` in order `order`."""
        if order == other:
            found = np.arange(rows.start, rows.stop, dtype=np.int64)
        else:
            found = read_positions(self.store, other, read_node_ids(self.store, order, rows))
        return torch.from_numpy(found).to(self.device)
