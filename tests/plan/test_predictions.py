"""gtool plan's predictions against what `gtool train` does: collective bytes exactly, peak memory closely.

The tests train one epoch per grid, all in one spawned world (tests/plan/ranks.py); every rank reports the
bytes its collectives moved (the trainer's own CommBytes counters, as --log records them) and its live
tensor bytes (tests.support.tensorbytes.LiveTensorBytes). One case trains the grid the plan picks for
ranks on several nodes, laid over them by the plan's placement.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.geometry.collectives import Collective, bytes_by_group, epoch_collectives
from gtool.geometry.grid import AXES, DEFAULT_PLACEMENT, ProcessGrid
from gtool.geometry.shapes import factorizations
from gtool.plan.costmodel.memory import estimate_memory
from gtool.plan.costmodel.minibatch import replay_comm_bytes
from gtool.plan.costmodel.planner import PlanRequest, make_plan
from gtool.plan.costmodel.profile import load_profile, save_profile
from gtool.store.cells import shard_table
from gtool.store.reader import open_store
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.local import launch_local
from gtool.trainer.minibatch.schedule import Schedule
from tests.plan.ranks import measure_cases
from tests.support.stores import StoreFactory

WORLD = 8
SMALL_GRIDS = [g.dims for p in range(1, WORLD + 1) for g in factorizations(p)]
VARIANTS = {  # name: (grid, config changes) run beside the default model
    "learnable-2x2x2": ((2, 2, 2), {"learnable_features": True}),
    "float64-3x2x1": ((3, 2, 1), {"dtype": "float64", "dropout": 0.0, "agg_blocks": 2}),
    "learnable-1x4x2": ((1, 4, 2), {"learnable_features": True, "layers": 4}),
    "bf16-2x2x2": ((2, 2, 2), {"comm_dtype": "bf16"}),
    "bf16-learnable-3x2x1": ((3, 2, 1), {"comm_dtype": "bf16", "learnable_features": True, "agg_blocks": 2}),
    "transform-first-3x2x1": ((3, 2, 1), {"layer_order": "transform-first", "agg_blocks": 2}),
    "transform-first-learnable-2x2x2": (
        (2, 2, 2),
        {"layer_order": "transform-first", "learnable_features": True},
    ),
    "aggregate-first-2x2x2": ((2, 2, 2), {"layer_order": "aggregate-first"}),
    "scalegnn-2x2x2": ((2, 2, 2), {"model": "scalegnn"}),
    "scalegnn-3x2x1": ((3, 2, 1), {"model": "scalegnn", "agg_blocks": 2}),
    "scalegnn-no-projection-no-norm-2x2x2": (
        (2, 2, 2),
        {"model": "scalegnn", "input_projection": False, "norm": "none"},
    ),
    "scalegnn-transform-first-bf16-learnable-1x2x2": (
        (1, 2, 2),
        {
            "model": "scalegnn",
            "layer_order": "transform-first",
            "comm_dtype": "bf16",
            "learnable_features": True,
        },
    ),
}
CAST = (
    "H = A F",
    "Q = H W",
    "dH = dQ W^T",
    "dF = A^T dH",
    "Z = F W",
    "Y = A Z",
    "dZ = A^T dY",
    "dF = dZ W^T",
)
"""The all-reduces --comm-dtype bf16 carries in bfloat16."""
MEMORY_GRIDS = [(1, 1, 1), (2, 1, 1), (2, 2, 1), (2, 2, 2)]
SCALEGNN_MEMORY_GRID = (2, 2, 1)
PLANNED_PER_NODE = 4
MINIBATCH = {"batch_size": 3000, "seed": 3}  # rmat:13:8: 3 steps, the last one short
REPLICATED = [(d, g.dims) for d in (1, 2) for p in range(1, WORLD // d + 1) for g in factorizations(p)]
SCALEGNN_MINIBATCH = [(1, (2, 2, 1)), (2, (2, 1, 1))]
"""Mini-batch cases of the ScaleGNN stack: its residuals' all-to-all bytes follow each step's members."""


def _name(grid: tuple[int, int, int], variant: str = "default") -> str:
    return f"{variant}-" + "x".join(map(str, grid))


def _measured(out: Path, name: str, grid: tuple[int, int, int], replicas: int = 1) -> list[dict]:
    files = sorted(out.glob(f"{name}-rank-*.json"), key=lambda f: int(f.stem.rsplit("-", 1)[1]))
    assert len(files) == replicas * ProcessGrid(*grid).size, f"{name}: not every rank reported"
    return [json.loads(f.read_text()) for f in files]


def _measured_cases(cases: list[tuple[str, TrainConfig, bool]], out: Path) -> Path:
    """Every case trained for one epoch in one world of WORLD ranks (groups shared between grids)."""
    out.mkdir(parents=True, exist_ok=True)
    launch_local(WORLD, measure_cases, cases, str(out))
    return out


def _collectives(config: TrainConfig, grid: tuple[int, int, int], rank: int = 0) -> list[Collective]:
    """Rank `rank`'s collectives (they differ between ranks only in a residual's all-to-all)."""
    store, m = open_store(config.store), config.model
    shapes, parts = m.shapes(ProcessGrid(*grid), store.num_nodes, store.num_features, store.num_classes, rank)
    return epoch_collectives(shapes, m.learnable_features, m.wire_itemsize, parts)


def _predicted_bytes(config: TrainConfig, grid: tuple[int, int, int], rank: int = 0) -> dict:
    return bytes_by_group(_collectives(config, grid, rank), config.torch_dtype.itemsize)


def _planned(base: TrainConfig) -> TrainConfig:
    """`base` on the grid and placement that the shipped profile (inter-node rows 10x slower) plans for
    WORLD ranks, PLANNED_PER_NODE per node."""
    profile, _ = load_profile(None)
    request = PlanRequest(WORLD, base.model, ranks_per_node=PLANNED_PER_NODE)
    best = make_plan(open_store(base.store), request, profile).best.grid
    return base.replace(grid=best.dims, placement=best.placement)


def _configs(store: str) -> dict[str, tuple[TrainConfig, tuple[int, int, int]]]:
    """Every case of the bytes test by name: the default model on every small grid, the variants, and the
    plan's grid laid over nodes as it placed it."""
    base = TrainConfig.of(store, hidden=24)
    cases = {_name(grid): (base.replace(grid=grid), grid) for grid in SMALL_GRIDS}
    for variant, (grid, changes) in VARIANTS.items():
        cases[_name(grid, variant)] = (base.replace(grid=grid, **changes), grid)
    planned = _planned(base)
    cases[_name(planned.grid, "placed")] = (planned, planned.grid)
    for replicas, grid in REPLICATED:
        config = base.replace(grid=grid, data_parallel=replicas, **MINIBATCH)
        cases[_name(grid, f"minibatch{replicas}")] = (config, grid)
    for replicas, grid in SCALEGNN_MINIBATCH:
        config = base.replace(grid=grid, data_parallel=replicas, model="scalegnn", **MINIBATCH)
        cases[_name(grid, f"minibatch{replicas}-scalegnn")] = (config, grid)
    return cases


@pytest.fixture(scope="module")
def runs(stores: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, TrainConfig, Path]:
    """The bytes cases (rmat:13:8, every grid up to 8 ranks and the variants) and the memory cases
    (rmat:16:8 on MEMORY_GRIDS, live tensor bytes tracked; first, in fresh processes), all in one
    spawned world."""
    root = tmp_path_factory.mktemp("plan-runs")
    # rmat:13:8: the smallest R-MAT whose planned placement is not the default one (the placed case)
    small = stores("rmat:13:8", tiles=4, num_features=20, num_classes=7)
    large = stores("rmat:16:8", tiles=8, num_features=64, num_classes=16)
    byte_cases = _configs(small)
    memory = TrainConfig.of(large, hidden=64)
    cases = [(_name(grid, "memory"), memory.replace(grid=grid), True) for grid in MEMORY_GRIDS]
    scalegnn = memory.replace(grid=SCALEGNN_MEMORY_GRID, model="scalegnn")
    cases.append((_name(SCALEGNN_MEMORY_GRID, "memory-scalegnn"), scalegnn, True))
    cases += [(name, config, False) for name, (config, _) in byte_cases.items()]
    return byte_cases, memory, _measured_cases(cases, root / "runs")


def test_grids_up_to_8_ranks_cover_every_factorization() -> None:
    assert len(SMALL_GRIDS) == 38 and (3, 2, 1) in SMALL_GRIDS and (1, 1, 7) in SMALL_GRIDS
    assert len(REPLICATED) == 38 + 13 and (2, (2, 2, 1)) in REPLICATED


def test_predicted_minibatch_bytes_equal_logged_bytes_on_every_d_x_3d_layout(runs: tuple) -> None:
    cases, _, out = runs
    for name, (config, grid) in cases.items():
        if not name.startswith("minibatch"):
            continue
        store = open_store(config.store)
        replicas = config.minibatch.data_parallel
        batch, seed = config.minibatch.batch_size, config.runtime.seed
        process_grid = ProcessGrid(*grid)
        sampling = config.minibatch.sampling
        samples = Schedule.of(store, batch, replicas, sampling).order(seed, 1).numpy()
        predicted = replay_comm_bytes(store, config.model, process_grid, replicas, batch, samples)
        for rank, measured in enumerate(_measured(out, name, grid, replicas)):
            assert measured["comm_bytes"] == predicted[rank], f"{name} rank {rank}"
        if replicas > 1:
            assert predicted[0]["data"]["all_reduce"] > 0


@pytest.mark.parametrize("variant", ["default", *VARIANTS, "placed"])
def test_predicted_collective_bytes_equal_logged_bytes(runs: tuple, variant: str) -> None:
    cases, _, out = runs
    for name, (config, grid) in cases.items():
        if not name.startswith(f"{variant}-"):
            continue
        for rank, measured in enumerate(_measured(out, name, grid)):
            assert measured["comm_bytes"] == _predicted_bytes(config, grid, rank), f"{name} rank {rank}"
        if variant.startswith("scalegnn"):  # its residuals' reshards were priced
            assert _measured(out, name, grid)[0]["comm_bytes"]["all"]["all_to_all"] > 0


def test_bf16_halves_the_logged_bytes_of_the_cast_all_reduces(runs: tuple) -> None:
    """2x2x2 with --comm-dtype bf16 logs, per group, the float32 run's all-reduce bytes less half those of
    H, Q, dH and dF; every other collective is unchanged."""
    cases, _, out = runs
    fp32_config = cases[_name((2, 2, 2))][0]
    halved = dict.fromkeys(AXES, 0)
    for collective in _collectives(fp32_config, (2, 2, 2)):
        if collective.operand in CAST:
            halved[AXES[collective.axis]] += collective.operand_bytes(4) // 2
    assert all(halved.values())
    fp32 = _measured(out, _name((2, 2, 2)), (2, 2, 2))
    bf16 = _measured(out, _name((2, 2, 2), "bf16-2x2x2"), (2, 2, 2))
    for rank, (full, cast) in enumerate(zip(fp32, bf16, strict=True)):
        for group, counts in full["comm_bytes"].items():
            want = {**counts, "all_reduce": counts["all_reduce"] - halved.get(group, 0)}
            assert cast["comm_bytes"][group] == want, f"rank {rank} group {group}"


def test_the_placed_case_lays_ranks_out_otherwise(runs: tuple) -> None:
    """The plan's placement for 8 ranks, 4 per node, is not gtool's default order: the bytes test above
    then checks a trainer whose ranks hold other coordinates than before placements existed."""
    cases, _, _ = runs
    (placed,) = [config for name, (config, _) in cases.items() if name.startswith("placed-")]
    assert placed.process_grid.placement != DEFAULT_PLACEMENT


def _profile_with_inter_node_cost(factor: float, path: Path) -> str:
    """The shipped profile with inter-node rows costing `factor` times the intra-node ones per byte."""
    shipped, _ = load_profile(None)
    intra = shipped.collectives
    rows = {g: replace(c, seconds_per_byte=factor * c.seconds_per_byte) for g, c in intra.items()}
    save_profile(replace(shipped, inter_node_collectives=rows), str(path))
    return str(path)


def test_slow_inter_node_links_change_the_plan(stores: StoreFactory, tmp_path: Path) -> None:
    """`gtool plan --ranks 16 --gpus-per-node 4` on rmat:16:8: inter-node all-reduces 10x slower than
    intra-node ones make it choose another grid or placement than equal ones, one that keeps a group
    inside the nodes."""
    store = stores("rmat:16:8", tiles=8, num_features=64, num_classes=16)
    chosen = {}
    for factor in (1.0, 10.0):
        profile = _profile_with_inter_node_cost(factor, tmp_path / f"{factor}.json")
        args = ["plan", store, "--ranks", "16", "--gpus-per-node", "4", "--profile", profile, "--json"]
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.output
        result = json.loads(done.stdout)
        assert result["ranks_per_node"] == 4
        best = result["grids"][0]
        chosen[factor] = (best["grid"], best["placement"])
        assert best["placement_collective_seconds"][best["placement"]] == min(
            best["placement_collective_seconds"].values()
        )
        assert best["node_axes"], f"{best['grid']} placed {best['placement']}: no group inside a node"
    assert chosen[1.0] != chosen[10.0], chosen


@pytest.mark.parametrize(
    ("grid", "model"),
    [(grid, "gcn") for grid in MEMORY_GRIDS] + [(SCALEGNN_MEMORY_GRID, "scalegnn")],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v,
)
def test_predicted_peak_memory_is_within_20_percent_of_measured(runs: tuple, grid: tuple, model: str) -> None:
    _, base, out = runs
    config = base.replace(model=model)
    m = config.model
    store = open_store(config.store)
    process_grid = ProcessGrid(*grid)
    orders = m.orders(store.num_features, store.num_classes)
    shards = shard_table(store, set(grid)).rank_shards(process_grid, orders, m.start)
    shapes, parts = m.shapes(process_grid, store.num_nodes, store.num_features, store.num_classes)
    predicted = estimate_memory(shapes, shards, m, store.num_classes, parts).peak
    name = _name(grid, "memory" if model == "gcn" else "memory-scalegnn")
    for rank, measured in enumerate(_measured(out, name, grid)):
        ratio = predicted[rank] / measured["peak"]
        assert 0.8 <= ratio <= 1.2, (
            f"{grid} rank {rank}: predicted {predicted[rank]}, measured {measured['peak']}"
        )
