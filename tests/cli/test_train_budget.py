"""`gtool train --memory-limit` and `gtool plan --memory-limit`: a run is priced before any process
starts; one over the limit is refused naming what it needs and the batch that fits, and
`--features-from auto` becomes store when the feature blocks do not fit."""

from __future__ import annotations

import json
import multiprocessing.process
import re
import subprocess

import pytest
from typer.testing import CliRunner

from gtool.cli.budget import budget_request, within_budget
from gtool.cli.main import app
from gtool.memory import Memory
from gtool.plan import layout_memory
from gtool.store.reader import open_store
from gtool.trainer import TrainConfig
from gtool.units import human_bytes
from tests.support.stores import StoreFactory


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=4, num_features=12)


@pytest.fixture
def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is built; from here on nothing may start a process (ranks, their supervisor)."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process started before the run was priced")

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refused)


def node_peak(store: str, limit: int | None = None, **options: object) -> tuple[int, dict[str, int]]:
    """The node peak of a run of `options` under `limit`, and every feature mode's."""
    config = TrainConfig.of(store, **options, memory_limit=limit)
    request = budget_request(config, config.world_size, config.minibatch.batch_size)
    run = layout_memory(open_store(store), request, config.process_grid, config.minibatch.data_parallel)
    return run.node_peak, run.node_peaks


def test_a_full_graph_run_over_the_limit_is_refused_naming_the_batch_that_fits(
    store: str, no_processes: None
) -> None:
    need, _ = node_peak(store)
    limit = need - 1
    result = CliRunner().invoke(app, ["train", store, "--memory-limit", str(limit)])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"error: a full-graph epoch on grid 1x1x1 needs about {human_bytes(need, up=True)}" in line
    assert f"more than --memory-limit {human_bytes(limit)}" in line
    batch = int(re.search(r"--batch-size ([\d,]+) or smaller fits", line).group(1).replace(",", ""))
    assert node_peak(store, limit, batch_size=batch)[0] <= limit
    if batch < open_store(store).num_nodes:
        assert node_peak(store, limit, batch_size=batch + 1)[0] > limit


def test_a_minibatch_run_that_does_not_fit_even_streamed_is_refused(store: str, no_processes: None) -> None:
    result = CliRunner().invoke(app, ["train", store, "--batch-size", "64", "--memory-limit", "100MB"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "error: --batch-size 64 on grid 1x1x1 needs about" in line
    assert "with its features read from the store, more than --memory-limit 100.0 MiB" in line
    assert "not even --batch-size 2 fits" in line


def test_auto_reads_the_store_when_the_feature_blocks_do_not_fit(store: str) -> None:
    _, peaks = node_peak(store, batch_size=64)
    between = (peaks["memory"] + peaks["store"]) // 2
    opened = open_store(store)
    config, note = within_budget(TrainConfig.of(store, batch_size=64, memory_limit=between), opened)
    assert config.minibatch.features_from == "store"
    assert note == (
        f"features read from the store per step (resident {human_bytes(peaks['memory'])} would exceed "
        f"--memory-limit {human_bytes(between)})"
    )
    roomy, _ = within_budget(TrainConfig.of(store, batch_size=64), opened)
    assert roomy.minibatch.features_from == "memory"
    given, note = within_budget(TrainConfig.of(store, batch_size=64, features_from="store"), opened)
    assert given.minibatch.features_from == "store" and note is None


def test_plan_prices_both_modes_and_names_the_one_a_run_would_use(store: str) -> None:
    _, peaks = node_peak(store, batch_size=64)
    between = (peaks["memory"] + peaks["store"]) // 2
    args = ["plan", store, "--ranks", "1", "--batch-size", "64", "--memory-limit", str(between)]
    result = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    (grid,) = result["grids"]
    assert result["memory_limit"] == between and grid["fits"] and grid["features_from"] == "store"
    modes = grid["memory_modes"]
    assert {m: modes[m]["node_peak_memory_bytes"] for m in modes} == peaks
    assert grid["store_reads"]["epoch_bytes"] == 512 * 12 * 4  # the rank's band: every row once
    table = CliRunner().invoke(app, args).stdout
    assert "read from store" in table and "an epoch" in table


def test_without_the_flag_the_budget_is_this_machines(
    store: str, no_processes: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    need, _ = node_peak(store)
    capped = Memory(total=need - 1, available=need - 1)  # as under a cgroup limit below the run's need
    monkeypatch.setattr("gtool.memory.machine_memory", lambda: capped)
    result = CliRunner().invoke(app, ["train", store])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"more than this machine's {human_bytes(need - 1)} (--memory-limit)" in line
