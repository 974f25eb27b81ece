"""`gtool stats` on the command line: JSON, tables, the heatmap, and errors."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest
import zarr
from typer.testing import CliRunner

from gtool.architecture import ModelConfig
from gtool.cli.main import app
from gtool.geometry.grid import ProcessGrid
from gtool.stats.report import GridPlan, collect_stats
from gtool.store import layout
from tests.stats.conftest import StatsStore, StoreCase, build
from tests.support.stores import StoreFactory


@pytest.fixture(scope="module")
def double_store(stores: StoreFactory) -> StatsStore:
    return build(stores, StoreCase("grid:13x11", 5, "double"))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["stats", *args], env={"COLUMNS": "160"})
    return result.exit_code, result.output


def test_json_is_the_collected_report(double_store: StatsStore) -> None:
    code, out = run(
        double_store.path, "--grid", "3x2x1", "--layers", "2", "--hidden", "8", "--compare", "--json"
    )
    assert code == 0
    want = collect_stats(
        double_store.store, GridPlan(ProcessGrid(3, 2, 1), ModelConfig(layers=2, hidden=8)), compare=True
    )
    assert json.loads(out) == json.loads(json.dumps(want))


def test_placement_numbers_the_ranks_as_train_does(double_store: StatsStore) -> None:
    """With --placement yxz, y varies fastest: rank r sits at the coordinates ProcessGrid gives it."""
    code, out = run(double_store.path, "--grid", "2x3x2", "--placement", "yxz", "--json")
    assert code == 0
    report = json.loads(out)["grid"]
    grid = ProcessGrid(2, 3, 2, "yxz")
    assert report["placement"] == "yxz"
    assert [r["coords"] for r in report["ranks"]] == [list(grid.coords(r)) for r in range(grid.size)]
    assert report["ranks"][1]["coords"] == [0, 1, 0]
    code, default = run(double_store.path, "--grid", "2x3x2", "--json")
    assert json.loads(default)["grid"]["ranks"][1]["coords"] == [0, 0, 1]


def test_tables(double_store: StatsStore) -> None:
    code, out = run(double_store.path, "--grid", "2x3x2", "--compare")
    assert code == 0
    titles = (
        "tile nonzeros",
        "bands",
        "grid 2x3x2 (placement zyx), 3 layers",
        "per rank",
        "collectives per epoch",
    )
    for title in titles:
        assert title in out
    assert "double *" in out and "balanced" in out


def test_heatmap_png(double_store: StatsStore, tmp_path: Path) -> None:
    png = tmp_path / "tiles.png"
    code, _ = run(double_store.path, "--plot", str(png))
    assert code == 0
    image = matplotlib.image.imread(png)
    assert image.shape[0] >= 400 and image.shape[1] >= 2 * image.shape[0] * 0.8  # two side-by-side panels


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "2x2"], "--grid must be 3 positive integers"),
        (["--grid", "2x0x1"], "--grid must be 3 positive integers"),
        (["--layers", "0"], "--layers must be >= 1, got 0"),
        (["--plot", "/no/such/folder/tiles.png"], "--plot: cannot write"),
        (["--placement", "yxz"], "--placement goes with --grid"),
    ],
)
def test_bad_options(double_store: StatsStore, args: list[str], message: str) -> None:
    code, out = run(double_store.path, *args)
    assert code == 2 and message in out


def test_incomplete_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "half.zarr"
    zarr.open_group(store=str(path), mode="w").attrs[layout.META_KEY] = {"layout": 1, "complete": False}
    code, out = run(str(path))
    assert code == 2 and "incomplete" in out


def test_scans_report_progress(double_store: StatsStore) -> None:
    """One scan of every stored matrix, then (for --compare) one of A0; each reports all its nonzeros."""
    store, seen = double_store.store, {}

    def start(what: str, total: int):
        seen[what] = [total, 0]
        return lambda nnz: seen[what].__setitem__(1, seen[what][1] + nnz)

    collect_stats(store, compare=True, start_scan=start)
    everything = sum(int(store.tile_nnz(m).sum()) for m in store.matrices)
    assert seen == {
        "reading tiles": [everything, everything],
        "counting schemes": [store.tile_nnz(0).sum()] * 2,
    }


def test_scalegnn_collectives_are_the_plans(double_store: StatsStore) -> None:
    """`--model scalegnn` sizes the stack's parts (projection, head, norms, residual all-to-alls) as
    `gtool plan` prices them (tests/plan/test_predictions.py checks those against training); without its
    residuals the whole-grid group moves nothing."""
    args = ["--grid", "2x2x2", "--layers", "2", "--hidden", "8", "--model", "scalegnn", "--json"]
    code, out = run(double_store.path, *args)
    assert code == 0, out
    grid = json.loads(out)["grid"]["collectives"]
    operands = {c["operand"] for c in grid["list"]}
    assert {"projection Y = X W", "head dX", "row squares", "residual"} <= operands
    assert grid["bytes_by_group"]["all"]["all_to_all"] > 0
    plan_args = ["plan", double_store.path, "--ranks", "8", "--layers", "2", "--hidden", "8"]
    planned = CliRunner().invoke(app, [*plan_args, "--model", "scalegnn", "--json"])
    assert planned.exit_code == 0, planned.output
    (same,) = [g for g in json.loads(planned.stdout)["grids"] if g["grid"] == "2x2x2"]
    assert same["comm_bytes"] == grid["bytes_by_group"]
    code, out = run(double_store.path, *args, "--no-residual")
    assert json.loads(out)["grid"]["collectives"]["bytes_by_group"]["all"]["all_to_all"] == 0
