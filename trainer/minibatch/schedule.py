"""Which nodes a step samples: a permutation of the N nodes per epoch, drawn from (seed, epoch), cut into
steps of B nodes that are dealt round-robin to the D replicas.

Every node is a sample member exactly once per epoch over all replicas, and every rank of a replica
derives the same sorted sample from the seed alone. Steps go in rounds of D (one per replica, the last
round possibly short); the replicas of a round average their gradients.
"""

from __future__ import annotations

import torch

from gtool.geometry.epochs import EpochSchedule
from gtool.trainer.nn.randomness import derive_seed

SAMPLE_STREAM = 4
"""The derive_seed stream of the epoch permutations (1: initial weights, 2: dropout, 3: sampled dropout)."""


class Schedule(EpochSchedule):
    """An epoch's steps (gtool.geometry.epochs) and the nodes each one samples."""

    def order(self, seed: int, epoch: int) -> torch.Tensor:
        """The node order of `epoch` (int64[N]), the same on every rank."""
        generator = torch.Generator().manual_seed(derive_seed(seed, SAMPLE_STREAM, epoch))
        return torch.randperm(self.num_nodes, generator=generator)

    def sample(self, order: torch.Tensor, step: int) -> torch.Tensor:
        """Step `step`'s sorted node ids, cut from the epoch's `order`."""
        return torch.sort(order[step * self.batch_size : (step + 1) * self.batch_size]).values
