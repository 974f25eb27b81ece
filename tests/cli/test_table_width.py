"""Tables fit the terminal: at 80 columns `gtool stats --grid 2x2x2` and `gtool plan` keep every column,
wrapping headers (and, where nothing else fits, figures) instead of cutting them to 'ra…'."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from gtool.architecture import ModelConfig
from gtool.cli.plan_tables import plan_tables
from gtool.plan import PlanRequest, load_profile, make_plan
from gtool.store.reader import open_store
from tests.support.stores import StoreFactory


def fits_80_columns(text: str, headers: list[str]) -> None:
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for header in headers:
        assert header in text


@pytest.mark.parametrize(
    "args, headers",
    [
        (["--grid", "2x2x2"], ["rank", "x,y,z", "L0", "nnz", "forward", "sent", "sbm_2000_4.zarr"]),
        (["--grid", "2x2x2", "--layers", "6", "--compare"], ["L5", "balanced"]),
    ],
    ids=["3-layers", "6-layers"],
)
def test_stats_tables_fit_80_columns(stores: StoreFactory, args: list[str], headers: list[str]) -> None:
    command = [sys.executable, "-m", "gtool.cli", "stats", stores("sbm:2000:4", tiles=4), *args]
    run = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert run.returncode == 0, run.stderr
    fits_80_columns(run.stdout, headers)


def test_plan_tables_fit_80_columns(stores: StoreFactory) -> None:
    store = stores("sbm:2000:4", tiles=4)
    profile, _ = load_profile(None)
    plan = make_plan(open_store(store), PlanRequest(8, ModelConfig()), profile)
    out = io.StringIO()
    terminal = Console(file=out, width=80)
    for table in plan_tables(store, 2000, plan, 0, terminal.width):
        terminal.print(table)
    fits_80_columns(out.getvalue(), ["grid", "epoch", "peak/rank", "fits", "1x8x1"])
