"""The pieces of gtool.plan against direct counts: grids of P ranks, shard nonzeros, profiles."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gtool.architecture import ModelConfig
from gtool.geometry.bandnnz import GridShards, ShardNnzTable, band_edges, first_uses
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import distinct_shards, rank_layers
from gtool.geometry.shapes import factorizations
from gtool.plan.calibration.microbench import calibrate
from gtool.plan.costmodel.memory import adjacency_bytes
from gtool.plan.costmodel.minibatch import MiniBatchRun
from gtool.plan.costmodel.planner import PlanRequest, layouts
from gtool.plan.costmodel.profile import DeviceProfile, ProfileError, load_profile, save_profile
from gtool.store.cells import CellCounts, shard_table
from gtool.store.reader import open_store
from gtool.store.scan import scan_tiles
from tests.loader.expected import layer_rects
from tests.support.reference import reassemble
from tests.support.stores import StoreFactory


@pytest.mark.parametrize("ranks, count", [(1, 1), (2, 3), (4, 6), (7, 3), (8, 10), (12, 18), (64, 28)])
def test_factorizations_are_every_grid_of_p_ranks(ranks: int, count: int) -> None:
    grids = factorizations(ranks)
    assert len(grids) == count == len({g.dims for g in grids})
    assert all(g.size == ranks for g in grids)


def test_the_last_round_of_a_minibatch_epoch_is_priced_at_its_largest_sample() -> None:
    assert MiniBatchRun(2000, 1500, 1).last_round_size == 500  # the short step alone
    assert MiniBatchRun(2000, 300, 2).last_round_size == 200  # 7 steps: round 4 is step 7 alone
    assert MiniBatchRun(2000, 400, 2).last_round_size == 400  # 5 steps of 400: no short step
    assert MiniBatchRun(2000, 1500, 2).last_round_size == 1500  # the short step beside a full one


def test_layouts_of_a_minibatch_run_keep_given_replicas() -> None:
    free = {d for d, _ in layouts(PlanRequest(8, batch_size=64))}
    assert free == {1, 2, 4, 8} and {d for d, _ in layouts(PlanRequest(8))} == {1}
    fixed = layouts(PlanRequest(8, batch_size=64, replicas=2))
    assert {d for d, _ in fixed} == {2} and {g.size for _, g in fixed} == {4} and len(fixed) == 6


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    # N = 143 over 5 x 5 tiles of 29: no band count below divides N or the tile grid.
    return stores("grid:13x11", tiles=5, num_features=6)


def rank_nnz(table: ShardNnzTable, dims: tuple[int, int, int], layers: int) -> np.ndarray:
    from gtool.geometry.grid import ProcessGrid

    return table.rank_shards(ProcessGrid(*dims), layers).nnz


@pytest.mark.parametrize("dims", [(1, 1, 1), (2, 1, 1), (3, 2, 1), (2, 2, 2), (1, 5, 2)])
def test_shard_nonzeros_match_the_blocks_of_the_stored_matrices(
    store: str, dims: tuple[int, int, int]
) -> None:
    """Exact by reading the crossed tiles, or by a tile scan (as gtool stats counts); estimated by area."""
    opened = open_store(store)
    n = opened.num_nodes
    matrices = {m: reassemble(opened, m) for m in opened.matrices}
    want = np.array(
        [
            [matrices[r.matrix][r.rows.start : r.rows.stop, r.cols.start : r.cols.stop].nnz for r in rects]
            for rects in (
                layer_rects(dims, rank, 4, n, opened.two_matrices) for rank in range(int(np.prod(dims)))
            )
        ]
    )
    np.testing.assert_array_equal(rank_nnz(shard_table(opened, set(dims), exact=True), dims, 4), want)
    scanned = CellCounts(opened, band_edges(n, set(dims)))
    scan_tiles(opened, [scanned])
    assert not scanned.estimated
    np.testing.assert_array_equal(rank_nnz(scanned.table(), dims, 4), want)
    estimate = shard_table(opened, set(dims))
    assert rank_nnz(estimate, dims, 4).sum(axis=0) == pytest.approx(want.sum(axis=0), abs=4)
    assert estimate.estimated == (dims != (1, 1, 1))


@pytest.mark.parametrize(
    ("dims", "placement", "layers"),
    [
        ((3, 2, 1), "zyx", 3),
        ((2, 2, 2), "xyz", (False, True, False)),
        ((1, 5, 2), "yzx", 4),
        ((4, 1, 3), "zxy", (True, True)),
    ],
)
def test_grid_shards_are_each_ranks_layers_as_the_geometry_holds_them(
    store: str, dims: tuple[int, int, int], placement: str, layers: int | tuple[bool, ...]
) -> None:
    """The arrays over ranks against rank_layers rank by rank: shape, which layer first holds each distinct
    shard, nonzeros of the stored matrix's block; and the adjacency bytes as the distinct shards' sum."""
    opened = open_store(store)
    matrices = {m: reassemble(opened, m) for m in opened.matrices}
    grid = ProcessGrid(*dims, placement)
    shards = shard_table(opened, set(dims), exact=True).rank_shards(grid, layers)
    model = ModelConfig(agg_blocks=2)
    for rank, held in enumerate(adjacency_bytes(shards, model)):
        geometry = rank_layers(grid, rank, layers, opened.num_nodes, opened.two_matrices)
        distinct = distinct_shards(geometry)
        blocks = [
            matrices[g.matrix][g.rows.start : g.rows.stop, g.inputs.start : g.inputs.stop] for g in geometry
        ]
        assert shards.rows[rank].tolist() == [g.rows.size for g in geometry]
        assert shards.cols[rank].tolist() == [g.inputs.size for g in geometry]
        assert shards.first[rank].tolist() == [distinct[g.key] is g for g in geometry]
        assert shards.nnz[rank].tolist() == [block.nnz for block in blocks]
        assert held == sum(
            adjacency_bytes(
                GridShards(*(np.array([[v]]) for v in (block.nnz, g.rows.size, g.inputs.size, True))), model
            )[0]
            for g, block in zip(geometry, blocks, strict=True)
            if distinct[g.key] is g
        )


def test_a_profile_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped, _ = load_profile(None)
    path = tmp_path / "p.json"
    save_profile(shipped, path, {"gemm": [1.0]})
    before = path.read_bytes()
    assert json.loads(before)["measurements"] == {"gemm": [1.0]}

    def cut_short(content: object, **_: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr("gtool.plan.costmodel.profile.json.dumps", cut_short)
    with pytest.raises(KeyboardInterrupt):
        save_profile(shipped, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_profile_files_are_checked(tmp_path: Path) -> None:
    shipped, note = load_profile(None)
    assert "shipped profile" in note and shipped.collective(2).seconds_per_byte > 0
    copy = tmp_path / "p.json"
    save_profile(shipped, str(copy))
    assert load_profile(str(copy))[0] == shipped
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(str(tmp_path / "missing.json"))
    content = json.loads(copy.read_text())
    del content["gemm"]
    copy.write_text(json.dumps(content))
    with pytest.raises(ProfileError, match=r"p.json: malformed profile \(KeyError: 'gemm'\)"):
        load_profile(str(copy))
    copy.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ProfileError, match="not a gtool plan profile"):
        load_profile(str(copy))


def test_profiles_without_inter_node_rows_price_every_group_with_their_rows(tmp_path: Path) -> None:
    """A version 2 profile (no inter-node rows) still loads, and its one row serves both; the shipped
    profile's inter-node rows are its intra-node rows at 10x the cost per byte, and say so."""
    shipped, note = load_profile(None)
    assert "inter-node rows assumed" in note
    inter, intra = shipped.collective(4, inter_node=True), shipped.collective(4)
    assert inter.seconds_per_byte == pytest.approx(10 * intra.seconds_per_byte)
    content = shipped.to_json()
    del content["inter_node_collectives"]
    content["version"] = 2
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(content))
    loaded, note = load_profile(str(old))
    assert "no inter-node rows" in note
    assert loaded.collective(4, inter_node=True) == loaded.collective(4) == intra
    content["version"] = 1
    old.write_text(json.dumps(content))
    with pytest.raises(ProfileError, match="profile version 1, this gtool reads 2, 3 and 4"):
        load_profile(str(old))


def _sharing_profile(cores: int) -> DeviceProfile:
    """The shipped profile with `cores` and collectives whose CPU work, per call and per wire byte, is
    half their time alone."""
    shipped, _ = load_profile(None)
    rows = {
        g: replace(c, cpu_latency=c.latency / 2, cpu_seconds_per_byte=c.seconds_per_byte / 2)
        for g, c in shipped.collectives.items()
    }
    return replace(shipped, collectives=rows, cores=cores)


def test_with_a_core_per_rank_collectives_take_their_time_alone() -> None:
    for cores in (0, 8, 64):
        profile = _sharing_profile(cores)
        alone = profile.collective(2)
        assert profile.sharing(8) == 1.0
        assert profile.collective_seconds(1e6, 2, False, 8) == alone.latency + 1e6 * alone.seconds_per_byte


def test_with_more_ranks_than_cores_collectives_take_all_ranks_cpu_work_over_the_cores() -> None:
    """8 ranks on 2 cores: every group of an axis runs its collective at once, so a collective takes
    the CPU work of all 8 shared over 2 cores, four times a rank's, whatever the group size."""
    profile = _sharing_profile(2)
    assert profile.sharing(8) == 4.0 and profile.sharing(2) == 1.0
    for g in (2, 4, 8):
        row = profile.collective(g)
        work = row.cpu_latency + 1e6 * row.cpu_seconds_per_byte
        assert profile.collective_seconds(1e6, g, False, 8) == pytest.approx(4 * work)
        assert profile.collective_seconds(1e6, g, False, 2) == row.latency + 1e6 * row.seconds_per_byte


def test_calibration_measures_every_cost(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, store: str) -> None:
    import gtool.plan.calibration.epochs as epochs
    import gtool.plan.calibration.microbench as module

    monkeypatch.setattr(module, "SPMM_SCALES", (8, 10))
    monkeypatch.setattr(module, "GEMM_SHAPES", ((256, 8, 8), (1024, 16, 16)))
    monkeypatch.setattr(module, "ELEMENTWISE_SIZES", (1 << 10, 1 << 14))
    monkeypatch.setattr(module, "MESSAGE_BYTES", (1 << 10, 1 << 14))
    monkeypatch.setattr(module, "ALLOCATION_BYTES", (1 << 16, 1 << 20))
    monkeypatch.setattr(epochs, "_stores", lambda scratch, report: {"grid:13x11": store})
    monkeypatch.setattr(epochs, "EPOCH_HIDDENS", (8,))
    monkeypatch.setattr(epochs, "EPOCHS", 2)
    monkeypatch.setattr(epochs, "WARMUP", 1)
    steps: list[str] = []
    profile, measured = calibrate("cpu", 1, 2, steps.append)
    assert sorted(profile.collectives) == [2] and len(measured["all_reduce"]["2"]) == 2
    assert sorted(profile.epochs) == [1, 2] and profile.epoch_factors(8) == profile.epochs[2]
    runs = measured["epochs"]["2"]["runs"]
    assert sorted(runs) == ["grid:13x11-h8-1x1x2", "grid:13x11-h8-1x2x1", "grid:13x11-h8-2x1x1"]
    assert all(len(ranks) == 2 and len(ranks[0]) == 1 for ranks in runs.values())
    assert all(f.spmm > 0 and f.dense > 0 and f.allocation > 0 for f in profile.epochs.values())
    assert len(measured["spmm"]) == 2 * 3 * 2 and steps
    assert np.shape(profile.spmm.seconds_per_nnz_col)[0] == 3
    assert profile.spmm.seconds(np.array([1000]), 100, 100, 32, 4)[0] > 0
    save_profile(profile, str(tmp_path / "p.json"))
    assert load_profile(str(tmp_path / "p.json"))[0] == profile


def test_first_uses_of_shards_are_found_in_one_pass() -> None:
    """Each layer's shard was compared with every earlier layer's: `gtool plan --layers 10000` ran past
    200 s; one sort of the (rank, key) pairs gives the same table."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        keys = rng.integers(0, 3, (rng.integers(1, 8), rng.integers(1, 6), 5))
        expected = np.ones(keys.shape[1::-1], dtype=bool)
        for later in range(keys.shape[0]):
            for earlier in range(later):
                expected[:, later] &= ~(keys[earlier] == keys[later]).all(axis=1)
        assert (first_uses(keys) == expected).all()
