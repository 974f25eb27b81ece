"""Mini-batch sampling: every rank's cut of a sample equals the rescaled induced subgraph of the unpermuted
graph, with no communication; the estimator is unbiased; cutting costs the same whatever N."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.distributed as dist

from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import layer_roles
from gtool.loader import load_rank
from gtool.store.reader import as_store
from gtool.trainer.minibatch.batch import RankSampler
from gtool.trainer.minibatch.cut import cut_shard, cut_shard_torch, transposed_torch
from gtool.trainer.minibatch.schedule import Schedule
from gtool.trainer.models.blocks import GCNConv
from gtool.trainer.models.grid import Grid
from gtool.trainer.nn.loss import sampled_epoch_loss
from tests.support.operators import OperatorLog
from tests.support.reference import rescaled_subgraph
from tests.support.stores import StoreFactory
from tests.trainer.cases import CPU, offline_comm
from tests.trainer.references import unpermuted_reference

GRAPH = "grid:7x11"  # N = 77: no band count of the grids divides it
SHAPE = {"tiles": 3, "seed": 5, "num_features": 4, "num_classes": 3, "perm": "double"}
LAYERS, BATCH, WIDTH = 3, 20, 6
ORDERS = (False, True, True)
"""Layer 0 aggregate-first, the middle and last layers transform-first (their rows on their c axis)."""


def sampler_of(
    store: str,
    shape: tuple[int, int, int],
    rank: int,
    schedule: Schedule,
    orders: tuple[bool, ...],
    features_from: str = "memory",
) -> tuple[RankSampler, list[GCNConv]]:
    """Rank `rank`'s sampler for GCN layers of `orders` (built as a model's blocks register what they
    multiply by, the features' band too), and the layers."""
    grid = ProcessGrid(*shape)
    data = load_rank(store, grid, rank, orders)
    seat = Grid(offline_comm(grid, rank), as_store(store), torch.float32, CPU, 0, data, None, features_from)
    seat.needs_rows(seat.input)
    layout, convs = seat.input, []
    for transform_first in orders:
        convs.append(GCNConv(seat, layout, WIDTH, transform_first))
        layout = convs[-1].output
    return RankSampler(seat, schedule), convs


def _no_collectives(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "all_reduce",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "broadcast",
        "send",
        "recv",
    ):
        monkeypatch.setattr(dist, name, lambda *args, **kwargs: pytest.fail("a sampling cut communicated"))


@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 2, 2), (3, 2, 1)])
def test_every_ranks_sampled_spmm_equals_scipy_on_the_unpermuted_graph(
    stores: StoreFactory, grid: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = stores(GRAPH, **SHAPE)
    reference = unpermuted_reference(store, LAYERS, torch.float64)
    adjacency = sp.csr_matrix(reference.graph.matrices[0][0].to_dense().numpy())
    n = adjacency.shape[0]
    features = np.random.default_rng(0).standard_normal((n, WIDTH))
    process_grid = ProcessGrid(*grid)
    for batch_size in (BATCH, 3):  # 3 nodes on a 3x2x1 grid leave some bands empty
        schedule = Schedule(n, batch_size, replicas=1)
        built = [sampler_of(store, grid, rank, schedule, ORDERS) for rank in range(process_grid.size)]
        with monkeypatch.context() as patched:
            _no_collectives(patched)
            _check_cuts(schedule, built, process_grid, adjacency, features)


def _check_cuts(
    schedule: Schedule,
    built: list[tuple[RankSampler, list[GCNConv]]],
    process_grid: ProcessGrid,
    adjacency: sp.csr_matrix,
    features: np.ndarray,
) -> None:
    last = schedule.steps - 1  # the short last step
    for seed, epoch, step in [(0, 1, 0), (0, 1, last), (7, 2, 1), (7, 4, last)]:
        sample = schedule.sample(schedule.order(seed, epoch), step).numpy()
        subgraph = rescaled_subgraph(adjacency, sample)
        want = subgraph @ features[sample]
        batches = [sampler.cut(seed, epoch, step) for sampler, _ in built]
        for layer in range(LAYERS):
            contraction = layer_roles(ORDERS)[layer][1]  # the ranks that differ only there sum their products
            sums: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
            for rank, ((sampler, convs), batch) in enumerate(zip(built, batches, strict=True)):
                conv, seat = convs[layer], sampler.grid
                rows = batch.members[seat.band_key(conv.output)].indices.numpy()
                cols = batch.members[seat.band_key(conv.input)].indices.numpy()
                sampled = torch.from_numpy(features[sample[cols]])
                got = (batch.blocks[conv.key].csr().to(torch.float64) @ sampled).numpy()
                np.testing.assert_allclose(got, subgraph[rows][:, cols] @ features[sample[cols]], atol=1e-5)
                coords = process_grid.coords(rank)
                key = tuple(coords[axis] for axis in range(3) if axis != contraction)
                total = sums[key][1] + got if key in sums else got
                sums[key] = (rows, total)
            for rows, total in sums.values():  # summed over the contraction group: the whole product
                np.testing.assert_allclose(total, want[rows], atol=1e-5)
            covered = np.sort(np.concatenate([rows for rows, _ in sums.values()]))
            assert np.array_equal(np.unique(covered), np.arange(sample.shape[0]))


def test_the_cpu_cut_equals_its_torch_specification(stores: StoreFactory) -> None:
    """The numba passes (CPU) cut the same entries, places and weights, bit for bit, as the torch operations
    (what CUDA runs), and transpose them alike; the column slots are left unmarked."""
    store = stores(GRAPH, **SHAPE)
    schedule = Schedule(77, BATCH, replicas=1)
    for rank in (0, 5):
        sampler, _ = sampler_of(store, (2, 2, 2), rank, schedule, (False,) * LAYERS)
        for step in (0, schedule.steps - 1):
            sample = schedule.sample(schedule.order(3, 1), step)
            for key, bands in sampler.grid.convs.items():
                shard = sampler.grid.shards[key].matrix
                rows, cols = (sampler.nodes[band].members(sample) for band in bands)
                slots = sampler.nodes[bands[1]].column_slots
                got = cut_shard(shard, rows, cols, schedule.rescaling(BATCH), slots)
                want = cut_shard_torch(shard, rows, cols, schedule.rescaling(BATCH))
                for name in ("rows", "cols", "values"):
                    assert torch.equal(getattr(got, name), getattr(want, name)), name
                assert (slots == -1).all()
                transpose = got.transpose_csr()
                parts = (transpose.crow_indices(), transpose.col_indices(), transpose.values())
                wanted = transposed_torch(want.rows, want.cols, want.values, want.shape[1])
                assert all(torch.equal(a, b) for a, b in zip(parts, wanted, strict=True))


def _mean_aggregations(
    sampler: RankSampler, features: np.ndarray, draws: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's sampled aggregation averaged over `draws` epochs (one estimate per node and epoch),
    with the 1/p rescaling and without it."""
    schedule = sampler.schedule
    totals = (np.zeros_like(features), np.zeros_like(features))
    for epoch in range(1, draws + 1):
        order = schedule.order(0, epoch)
        for step in range(schedule.steps):
            sample = schedule.sample(order, step).numpy()
            (block,) = sampler.cut(0, epoch, step).blocks.values()
            values = block.values.double()
            unscaled = values / schedule.rescaling(sample.shape[0])
            plain = torch.where(block.rows == block.cols, values, unscaled)
            entries = (block.rows.numpy(), block.cols.numpy())
            for total, weights in zip(totals, (values, plain), strict=True):
                matrix = sp.csr_matrix((weights.numpy(), entries), block.shape)
                total[sample] += matrix @ features[sample]
    return totals[0] / draws, totals[1] / draws


def test_an_aggregation_averaged_over_draws_approaches_the_full_one(stores: StoreFactory) -> None:
    store = stores(GRAPH, **{**SHAPE, "perm": "none"})  # 1x1x1 and no permutation: block rows are nodes
    adjacency = sp.csr_matrix(unpermuted_reference(store, 1, torch.float64).graph.matrices[0][0].to_dense())
    n = adjacency.shape[0]
    features = np.random.default_rng(1).standard_normal((n, WIDTH))
    want = adjacency @ features
    schedule = Schedule(n, BATCH, 1)
    sampler, _ = sampler_of(store, (1, 1, 1), 0, schedule, (False,))

    def error(got: np.ndarray) -> float:
        return float(np.linalg.norm(got - want) / np.linalg.norm(want))

    few, _ = _mean_aggregations(sampler, features, 8)
    many, unscaled = _mean_aggregations(sampler, features, 128)
    assert error(many) < error(few) / 2.5, (error(few), error(many))  # 16x the draws: 1/4 of the error
    assert error(many) < 0.15
    assert error(unscaled) > 0.3  # without 1/p the mean converges elsewhere


def cut_operators(store: str) -> Counter[str]:
    """The operators of cutting one sample of B = 16 nodes on a 2x2x2 grid's rank 5 (3 layers)."""
    schedule = Schedule(as_store(store).num_nodes, 16, 1)
    sampler, _ = sampler_of(store, (2, 2, 2), 5, schedule, (False,) * LAYERS)
    sampler.cut(0, 1, 0)  # the epoch's order is drawn once, at its first step
    with OperatorLog() as log:
        sampler.cut(0, 1, 1)
    return log.calls


def test_cutting_a_sample_dispatches_the_same_operators_on_a_16x_larger_graph(stores: StoreFactory) -> None:
    shape = {"tiles": 2, "num_features": 6, "num_classes": 3}
    small = cut_operators(stores("grid:8x8", **shape))
    large = cut_operators(stores("grid:32x32", **shape))
    assert small == large
    assert sum(small.values()) < 200, small


def test_an_epochs_loss_weights_its_steps_by_their_training_nodes() -> None:
    # a step without training nodes (loss 0) and a replica without a step (None) count for nothing
    assert sampled_epoch_loss([[1.0, 0.0], [4.0, None]], [[2.0, 0.0], [1.0, 0.0]]) == 2.0


def test_windows_sample_each_node_once_per_epoch_in_whole_windows_of_the_pc_order(
    stores: StoreFactory,
) -> None:
    store = as_store(stores(GRAPH, **SHAPE))
    pc = store.array("perm/c")[:]
    position = np.argsort(pc)  # node id -> pc position
    for batch, window in ((BATCH, 1), (77, 3)):  # W = ceil(B / 32): a step mixes at least 32 windows
        schedule = Schedule.of(store, batch, 1, "windows")
        assert schedule.window == window
        for epoch in (1, 2):
            order = schedule.order(9, epoch)
            assert torch.equal(order, Schedule.of(store, batch, 1, "windows").order(9, epoch))  # every rank
            assert sorted(order.tolist()) == list(range(77))
            positions = position[order.numpy()]
            starts = positions[positions % window == 0]
            runs = np.split(positions, np.nonzero(positions % window == 0)[0][1:])
            assert len(runs) == len(starts) == -(-77 // window)
            assert all(np.array_equal(run, np.arange(run[0], run[0] + len(run))) for run in runs)
        assert not torch.equal(schedule.order(9, 1), schedule.order(9, 2))


def test_a_streaming_rank_reads_its_members_rows_of_its_feature_block_and_no_more(
    stores: StoreFactory,
) -> None:
    """With features from the store, each cut carries the members' rows of the rank's feature block (as
    the held block gives them), and the rank reads exactly those rows of its feature band."""
    store = stores(GRAPH, **SHAPE)
    schedule = Schedule.of(as_store(store), BATCH, 1, "windows")
    for rank in range(8):
        sampler, _ = sampler_of(store, (2, 2, 2), rank, schedule, ORDERS, "store")
        seat = sampler.grid
        held = load_rank(store, seat.grid, rank, ORDERS).features
        assert held is not None
        read = 0
        for step in (0, schedule.steps - 1):
            batch = sampler.cut(3, 1, step)
            members = batch.members[seat.band_key(seat.input)]
            assert batch.features is not None and torch.equal(batch.features, held[members.positions])
            read += members.count * seat.feature_cols().real * 4
            assert sampler.read.bytes == read
