"""Which nodes a step samples: a permutation of the N nodes per epoch, drawn from (seed, epoch), cut into
steps of B nodes that are dealt round-robin to the D replicas.

Every node is a sample member exactly once per epoch over all replicas, and every rank of a replica
derives the same sorted sample from the seed alone. Steps go in rounds of D (one per replica, the last
round possibly short); the replicas of a round average their gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.geometry.epochs import batch_problem, epoch_rounds, epoch_steps
from gtool.trainer.nn.randomness import derive_seed

SAMPLE_STREAM = 4
"""The derive_seed stream of the epoch permutations (1: initial weights, 2: dropout, 3: sampled dropout)."""


@dataclass(frozen=True)
class Schedule:
    """Steps of `batch_size` nodes out of `num_nodes`, dealt to `replicas` replicas."""

    num_nodes: int
    batch_size: int
    replicas: int

    def __post_init__(self) -> None:
        if problem := batch_problem(self.batch_size, self.num_nodes):
            raise ValueError(problem)

    @property
    def steps(self) -> int:
        """Steps per epoch over all replicas (the last one holds the remainder of N / B)."""
        return epoch_steps(self.num_nodes, self.batch_size)

    @property
    def rounds(self) -> int:
        """Rounds per epoch: in round k replica d takes step k * D + d, when there is one."""
        return epoch_rounds(self.num_nodes, self.batch_size, self.replicas)

    def step_of(self, round_index: int, replica: int) -> int | None:
        """The global step replica `replica` takes in round `round_index`, or None (a short last round)."""
        step = round_index * self.replicas + replica
        return step if step < self.steps else None

    def active(self, round_index: int) -> int:
        """How many replicas take a step in round `round_index`."""
        return min(self.replicas, self.steps - round_index * self.replicas)

    def order(self, seed: int, epoch: int) -> torch.Tensor:
        """The node order of `epoch` (int64[N]), the same on every rank."""
        generator = torch.Generator().manual_seed(derive_seed(seed, SAMPLE_STREAM, epoch))
        return torch.randperm(self.num_nodes, generator=generator)

    def sample(self, order: torch.Tensor, step: int) -> torch.Tensor:
        """Step `step`'s sorted node ids, cut from the epoch's `order`."""
        return torch.sort(order[step * self.batch_size : (step + 1) * self.batch_size]).values

    def rescaling(self, size: int) -> float:
        """1/p for a sample of `size` nodes: p = (size-1)/(N-1), the probability that a given other node
        is in the sample with a given one (a sample of one node has no off-diagonal entry to rescale)."""
        return (self.num_nodes - 1) / max(1, size - 1)
