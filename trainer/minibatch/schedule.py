"""Which nodes a step samples: a node order per epoch, drawn from (seed, epoch), cut into steps of B nodes
that are dealt round-robin to the D replicas; `Schedule.of` makes a run's (docs/howto/out-of-core.md).

'uniform': a permutation of the N nodes. 'windows': a permutation of windows of W consecutive positions
of the store's pc order (a random node order, so a window is a uniform random set of nodes), so that a
step's feature rows are whole chunks of the store. Either way every node is a sample member exactly once
per epoch, and every rank of a replica derives the same sorted sample from the seed alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.bands import band, ceil_div
from gtool.geometry.epochs import EpochSchedule
from gtool.loader import read_node_ids
from gtool.store import layout
from gtool.store.reader import Store
from gtool.trainer.nn.randomness import derive_seed

SAMPLE_STREAM = 4
"""The derive_seed stream of the epoch permutations (1: initial weights, 2: dropout, 3: sampled dropout)."""
MIN_WINDOWS = 32
"""Windows a step mixes at least: W is at most ceil(B / MIN_WINDOWS) (small graphs: fewer than a chunk)."""


def window_size(store: Store, batch_size: int) -> int:
    """W: the store's feature chunk rows, at most ceil(B / MIN_WINDOWS), at least 1."""
    chunk_rows = int(store.array(layout.FEATURES).chunks[0])
    return max(1, min(chunk_rows, ceil_div(batch_size, MIN_WINDOWS)))


@dataclass(frozen=True, eq=False)
class Schedule(EpochSchedule):
    """An epoch's steps (gtool.geometry.epochs) and the nodes each one samples: uniformly, or by windows
    of `window` positions of the pc order when `pc_ids` (the node id at each pc position) is given."""

    window: int = 1
    pc_ids: torch.Tensor | None = None

    @classmethod
    def of(cls, store: Store, batch_size: int, replicas: int, sampling: str) -> Schedule:
        """A run's schedule on `store`. Windows hold perm/c (read once, int32 where N allows): a step's
        ids by windows would touch most of its chunks, decoding all N every step."""
        n = store.num_nodes
        if sampling == "uniform":
            return cls(n, batch_size, replicas)
        ids = torch.from_numpy(read_node_ids(store, "c", band(0, 1, n)))
        if n < 2**31:
            ids = ids.to(torch.int32)
        return cls(n, batch_size, replicas, window_size(store, batch_size), ids)

    def order(self, seed: int, epoch: int) -> torch.Tensor:
        """The node order of `epoch` (int64[N]), the same on every rank."""
        generator = torch.Generator().manual_seed(derive_seed(seed, SAMPLE_STREAM, epoch))
        if self.pc_ids is None:
            return torch.randperm(self.num_nodes, generator=generator)
        windows = torch.randperm(ceil_div(self.num_nodes, self.window), generator=generator)
        positions = (windows.unsqueeze(1) * self.window + torch.arange(self.window)).flatten()
        positions = positions[positions < self.num_nodes]  # the last window may be short
        return self.pc_ids[positions].to(torch.int64)

    def sample(self, order: torch.Tensor, step: int) -> torch.Tensor:
        """Step `step`'s sorted node ids, cut from the epoch's `order`."""
        return torch.sort(order[step * self.batch_size : (step + 1) * self.batch_size]).values
