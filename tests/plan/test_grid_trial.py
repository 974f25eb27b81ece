"""`--grid auto` times the grids the model predicts close to the best and takes the fastest measured:
which grids it times, what it chooses, when it trusts the model, and its trial cached per machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.architecture import ModelConfig
from gtool.cli.main import app
from gtool.geometry.grid import ProcessGrid
from gtool.plan.calibration import trials
from gtool.plan.calibration.machine import machine_trials_path, plan_profile
from gtool.plan.costmodel.auto import TRIAL_GRIDS, TRIAL_SPREAD, choose_layout, trial_grids
from gtool.plan.costmodel.planner import PlanRequest, make_plan
from gtool.plan.costmodel.profile import load_profile
from gtool.store.reader import open_store
from gtool.trainer import RankFailed, TrainConfig
from tests.support.load import scaled
from tests.support.stores import StoreFactory

GTOOL = [sys.executable, "-m", "gtool.cli"]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("sbm:2000:4", tiles=4)


def test_the_grids_timed_are_those_predicted_close_to_the_best(store: str) -> None:
    profile, _ = load_profile(None)
    plan = make_plan(open_store(store), PlanRequest(8, ModelConfig(hidden=16)), profile)
    timed = trial_grids(plan)
    assert timed[0] is plan.best and 1 < len(timed) <= TRIAL_GRIDS
    assert all(g.fits and g.time.total <= TRIAL_SPREAD * plan.best.time.total for g in timed)
    rest = plan.grids[len(timed) :]
    assert plan.grids[: len(timed)] == timed  # the best predicted first
    assert len(timed) == TRIAL_GRIDS or rest[0].time.total > TRIAL_SPREAD * plan.best.time.total
    mini_batch = make_plan(open_store(store), PlanRequest(8, ModelConfig(hidden=16), batch_size=64), profile)
    assert trial_grids(mini_batch) == []


def test_the_fastest_measured_grid_is_chosen_and_the_model_s_pick_where_none_was_timed(store: str) -> None:
    profile, _ = load_profile(None)
    request = PlanRequest(8, ModelConfig(hidden=16))
    timed: list[list[ProcessGrid]] = []

    def timing(grids: list[ProcessGrid], predicted: list[float]) -> dict[str, float]:
        timed.append(grids)
        return {str(grid): 1.0 for grid in grids} | {str(grids[-1]): 0.5}

    replicas, grid, why = choose_layout(open_store(store), request, profile, "note", timing)
    assert replicas == 1 and grid == timed[0][-1] and "the fastest measured epoch, 0.5 s" in why
    assert f"the model's pick, {timed[0][0]}, took 100% longer" in why
    model, picked, said = choose_layout(open_store(store), request, profile, "note", lambda grids, p: None)
    assert picked == timed[0][0] and "fastest predicted epoch" in said


def test_gtool_plan_names_the_grids_grid_auto_would_time(store: str) -> None:
    profile, _ = load_profile(None)
    timed = trial_grids(make_plan(open_store(store), PlanRequest(8, ModelConfig(hidden=16)), profile))
    shown = CliRunner().invoke(app, ["plan", store, "--ranks", "8", "--hidden", "16", "--profile", "shipped"])
    said = " ".join(shown.stdout.split())
    assert shown.exit_code == 0 and f"times the {len(timed)} grids predicted within 1.5x of the best" in said
    assert ", ".join(str(g.grid) for g in timed) in said
    batch = ["plan", store, "--ranks", "8", "--hidden", "16", "--profile", "shipped", "--batch-size", "64"]
    assert "--grid auto` on local ranks times" not in CliRunner().invoke(app, batch).stdout


@pytest.mark.integration
def test_a_trial_times_every_grid_once_and_is_cached(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))
    config = TrainConfig.of(store, hidden=16)
    grids = [ProcessGrid(2, 1, 1), ProcessGrid(1, 2, 1), ProcessGrid(1, 1, 2, "xyz")]
    said: list[str] = []
    long = [trials.TRIAL_SECONDS / 3] * 3
    assert trials.time_grids(config, grids, long, said.append) is None  # too long: the model's pick stands
    assert said == [] and not machine_trials_path().exists()
    measured = trials.time_grids(config, grids, [0.001] * 3, said.append)
    assert measured is not None and sorted(measured) == ["1x1x2", "1x2x1", "2x1x1"]
    assert all(0 < seconds < scaled(60) for seconds in measured.values())
    assert "timing the 3 grids" in said[0] and str(machine_trials_path()) in said[0]

    def no_ranks(*args: object) -> None:
        raise AssertionError("the cached trial ran again")

    monkeypatch.setattr(trials, "run_local", no_ranks)
    assert trials.time_grids(config, grids, [0.001] * 3, said.append) == measured
    assert "as timed on this machine before" in said[-1]
    plan_profile(None, True, said.append, may_calibrate=False)  # --recalibrate forgets the trials
    assert not machine_trials_path().exists()


def test_another_model_or_a_damaged_cache_is_timed_afresh(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))
    ran: list[int] = []

    def fake_ranks(ranks: int, main: object, cases: list, warmup: int, out: str) -> None:
        """Every rank's steady epochs (each epoch's phases, seconds first): rank r's epoch k takes r + k s."""
        ran.append(ranks)
        for rank in range(ranks):
            epochs = {name: [[rank + k, 0, 0, 0] for k in range(warmup, 3)] for name, _ in cases}
            Path(f"{out}.{rank}").write_text(json.dumps(epochs))

    monkeypatch.setattr(trials, "run_local", fake_ranks)
    machine_trials_path().parent.mkdir(parents=True)
    machine_trials_path().write_text("not json")
    grids, quick = [ProcessGrid(2, 1, 1), ProcessGrid(1, 2, 1)], [0.001, 0.001]
    config = TrainConfig.of(store, hidden=16)
    assert trials.time_grids(config, grids, quick, print) == {"2x1x1": 2.5, "1x2x1": 2.5}  # slowest rank
    assert trials.time_grids(config, grids, quick, print) is not None and ran == [2]
    trials.time_grids(config.replace(hidden=8), grids, quick, print)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")  # the ranks would run otherwise
    trials.time_grids(config, grids, quick, print)
    assert ran == [2, 2, 2] and len(json.loads(machine_trials_path().read_text())) == 3


@pytest.mark.parametrize(
    "timing",
    [{"2x1x1": "fast", "1x2x1": "slow"}, {"2x1x1": True, "1x2x1": -1}, {"2x1x1": 1.0}, ["2x1x1", 1.0]],
    ids=["strings", "bool-negative", "a-grid-missing", "a-list"],
)
def test_a_cached_trial_of_the_wrong_form_is_timed_afresh(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timing: object
) -> None:
    """A trial cache that was valid JSON with wrong types: `TypeError: '<' not supported` (a traceback)."""
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))
    config, grids = TrainConfig.of(store, hidden=16), [ProcessGrid(2, 1, 1), ProcessGrid(1, 2, 1)]
    machine_trials_path().parent.mkdir(parents=True)
    machine_trials_path().write_text(json.dumps({trials.trial_key(config, grids): timing}))

    def fake_ranks(ranks: int, main: object, cases: list, warmup: int, out: str) -> None:
        for rank in range(ranks):
            Path(f"{out}.{rank}").write_text(json.dumps({name: [[1.0, 0, 0, 0]] for name, _ in cases}))

    monkeypatch.setattr(trials, "run_local", fake_ranks)
    assert trials.time_grids(config, grids, [0.001, 0.001], print) == {"2x1x1": 1.0, "1x2x1": 1.0}


def test_a_failed_trial_leaves_the_model_s_pick_and_caches_nothing(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GTOOL_CACHE", str(tmp_path))

    def failing(*args: object) -> None:
        raise RankFailed(1, "out of memory", "Traceback: ... MemoryError")

    monkeypatch.setattr(trials, "run_local", failing)
    said: list[str] = []
    grids = [ProcessGrid(2, 1, 1), ProcessGrid(1, 2, 1)]
    assert trials.time_grids(TrainConfig.of(store), grids, [0.001, 0.001], said.append) is None
    assert "the trial failed (rank 1 failed: out of memory); the model's pick stands:" in said[1]
    assert said[2] == "Traceback: ... MemoryError" and not machine_trials_path().exists()


def test_the_trial_s_estimate_counts_the_start_every_load_and_every_epoch() -> None:
    assert trials.trial_seconds([]) == trials.START_SECONDS
    per_grid = 2 * (trials.TRIAL_EPOCHS + 1)
    assert trials.trial_seconds([0.5, 1.0]) == pytest.approx(trials.START_SECONDS + per_grid * 1.5)


@pytest.mark.integration
def test_gtool_train_grid_auto_times_the_close_grids_once(store: str, tmp_path: Path) -> None:
    args = [*GTOOL, "train", store, "--grid", "auto", "--ranks", "2", "--hidden", "16", "--epochs", "1"]
    env = {**os.environ, "GTOOL_CACHE": str(tmp_path)}
    first = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    said = " ".join(first.stderr.split())
    assert "--grid auto: timing the" in said and "the fastest measured epoch" in said
    again = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert "as timed on this machine before" in " ".join(again.stderr.split())
    assert again.stderr.split("--grid auto chose ")[1][:5] == first.stderr.split("--grid auto chose ")[1][:5]
