"""A run's memory against a budget (gtool.plan.costmodel.budget): both feature modes, a node's ranks,
the store's reads, the largest batch that fits; on a synthetic one-rank grid (no store)."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.architecture import ModelConfig
from gtool.geometry.bandnnz import GridShards
from gtool.geometry.grid import ProcessGrid
from gtool.memory import RANK_BASE_BYTES
from gtool.plan.costmodel.budget import (
    ALLOCATOR_SLACK_BYTES,
    ROW_BLOCKS_HELD,
    Budget,
    largest_batch,
    minibatch_memory,
    node_peak,
    run_memory,
    store_reads,
)
from gtool.plan.costmodel.memory import adjacency_bytes, estimate_memory

N, F, C, NNZ = 100_000, 64, 8, 1_000_000
MODEL = ModelConfig(layers=2, hidden=32, dropout=0.1)


def one_rank() -> tuple[list, object, GridShards]:
    shapes, parts = MODEL.shapes(ProcessGrid(1, 1, 1), N, F, C)
    ones = np.ones((1, 2), dtype=np.int64)
    shards = GridShards(nnz=NNZ * ones, rows=N * ones, cols=N * ones, first=np.array([[True, False]]))
    return shapes, parts, shards


def test_streamed_ranks_hold_a_few_steps_of_rows_and_read_their_band_once_an_epoch() -> None:
    shapes, parts, shards = one_rank()
    batch = 10_000
    resident = minibatch_memory(shapes, shards, MODEL, C, N, batch, False, parts)
    streamed = minibatch_memory(shapes, shards, MODEL, C, N, batch, True, parts)
    assert resident.features == estimate_memory(shapes, shards, MODEL, C, parts).features == N * F * 4
    assert streamed.features == ROW_BLOCKS_HELD * batch * F * 4
    assert streamed.adjacency[0] == resident.adjacency[0] < adjacency_bytes(shards, MODEL)[0]  # no transposes
    assert int(streamed.peak[0]) < int(resident.peak[0])
    reads = store_reads(shapes, N, batch, parts)
    assert (reads.step_bytes, reads.epoch_bytes) == (batch * F * 4, N * F * 4)


def test_the_mode_is_memory_when_it_fits_else_store_else_the_smallest_refused() -> None:
    shapes, parts, shards = one_rank()

    def run(limit: int | None, features_from: str = "auto"):
        budget = Budget(None, limit, 1, 1, features_from)
        return run_memory(shapes, shards, MODEL, C, N, 10_000, budget, parts)

    free = run(None)
    assert free.mode == "memory" and free.fits and set(free.modes) == {"memory", "store"}
    each = RANK_BASE_BYTES + ALLOCATOR_SLACK_BYTES
    assert free.node_peaks["memory"] == int(free.modes["memory"].peak[0]) + each
    between = (free.node_peaks["memory"] + free.node_peaks["store"]) // 2
    assert (run(between).mode, run(between).fits) == ("store", True)
    assert (run(between, "memory").mode, run(between, "memory").fits) == ("memory", False)
    tight = run(free.node_peaks["store"] - 1)
    assert (tight.mode, tight.fits) == ("store", False)
    full = run_memory(shapes, shards, MODEL, C, N, None, Budget(None, None, 1, 1), parts)
    assert set(full.modes) == {"memory"} and full.reads is None


def test_a_node_holds_its_consecutive_ranks_replica_after_replica() -> None:
    peaks, each = np.array([10, 20, 30, 40]), RANK_BASE_BYTES + ALLOCATOR_SLACK_BYTES
    assert node_peak(peaks, 1, 4) == 100 + 4 * each
    assert node_peak(peaks, 2, 2) == 70 + 2 * each
    assert node_peak(peaks, 1, 3) == 60 + 3 * each  # the last node holds one rank


@pytest.mark.parametrize("limit, want", [(1, None), (2, 2), (777, 777), (10**6, 1000)])
def test_the_largest_batch_is_found_by_bisection(limit: int, want: int | None) -> None:
    asked: list[int] = []

    def fits(batch: int) -> bool:
        asked.append(batch)
        return batch <= limit

    assert largest_batch(fits, 1000) == want
    assert len(asked) <= 12


def test_eval_decides_whether_the_full_graph_forward_is_priced_and_whether_store_may_be_used() -> None:
    shapes, parts, shards = one_rank()

    def run(evaluation: str | None):
        budget = Budget(None, None, 1, 1, "auto", evaluation)
        return run_memory(shapes, shards, MODEL, C, N, 10_000, budget, parts)

    default, sampled, full = run(None), run("sampled"), run("full")
    assert set(full.modes) == {"memory"} and set(default.modes) == {"memory", "store"}
    assert full.node_peaks["memory"] == default.node_peaks["memory"] > sampled.node_peaks["memory"]
    assert sampled.node_peaks["store"] == default.node_peaks["store"]
