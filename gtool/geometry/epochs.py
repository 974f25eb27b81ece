"""A mini-batch epoch in steps and rounds, torch-free: the trainer's schedule and the plan count alike."""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.bands import ceil_div


def batch_problem(batch_size: int, num_nodes: int) -> str | None:
    """Why steps of `batch_size` nodes cannot be cut from `num_nodes` nodes, or None."""
    if batch_size > num_nodes:
        return f"--batch-size {batch_size} is more than the {num_nodes} nodes"
    return None


def epoch_steps(num_nodes: int, batch_size: int) -> int:
    """Steps of `batch_size` nodes per epoch over all replicas (the last one holds the remainder)."""
    return ceil_div(num_nodes, batch_size)


def epoch_rounds(num_nodes: int, batch_size: int, replicas: int) -> int:
    """Rounds per epoch: one step per replica a round, the last round possibly short."""
    return ceil_div(epoch_steps(num_nodes, batch_size), replicas)


@dataclass(frozen=True)
class EpochSchedule:
    """Steps of `batch_size` nodes out of `num_nodes`, dealt round-robin to `replicas` replicas: in round
    k replica d takes step k * D + d (the last round possibly short). Which nodes a step holds is drawn
    by the trainer (gtool.trainer.minibatch.schedule)."""

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
        """Rounds per epoch."""
        return epoch_rounds(self.num_nodes, self.batch_size, self.replicas)

    def step_of(self, round_index: int, replica: int) -> int | None:
        """The global step replica `replica` takes in round `round_index`, or None (a short last round)."""
        step = round_index * self.replicas + replica
        return step if step < self.steps else None

    def active(self, round_index: int) -> int:
        """How many replicas take a step in round `round_index`."""
        return min(self.replicas, self.steps - round_index * self.replicas)

    def rescaling(self, size: int) -> float:
        """1/p for a sample of `size` nodes: p = (size-1)/(N-1), the probability that a given other node
        is in the sample with a given one (a sample of one node has no off-diagonal entry to rescale)."""
        return (self.num_nodes - 1) / max(1, size - 1)
