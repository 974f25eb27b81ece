"""A mini-batch epoch in steps and rounds, torch-free: the trainer's schedule and the plan count alike."""

from __future__ import annotations

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
