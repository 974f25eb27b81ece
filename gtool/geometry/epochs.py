"""A mini-batch epoch in steps and rounds, torch-free: the trainer's schedule and the plan count alike."""

from __future__ import annotations

from gtool.geometry.bands import ceil_div


def epoch_steps(num_nodes: int, batch_size: int) -> int:
    """Steps of `batch_size` nodes per epoch over all replicas (the last one holds the remainder)."""
    return ceil_div(num_nodes, batch_size)


def epoch_rounds(num_nodes: int, batch_size: int, replicas: int) -> int:
    """Rounds per epoch: one step per replica a round, the last round possibly short."""
    return ceil_div(epoch_steps(num_nodes, batch_size), replicas)
