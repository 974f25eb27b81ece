"""Tables fit the terminal: at 80 columns `gtool stats --grid 2x2x2` and `gtool plan` keep every column,
wrapping headers (and, where nothing else fits, figures) instead of cutting them to 'ra…'."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

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


def piped(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`gtool ARGS` with its output in a pipe, no terminal width given ($COLUMNS unset)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    command = [sys.executable, "-m", "gtool.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)


def test_piped_output_is_not_wrapped_at_80_columns(stores: StoreFactory, tmp_path: Path) -> None:
    """Piped to a file, the summary's rows were split mid-parenthesis at 80 columns, and a one-rank run
    said `(1 ranks, local)`."""
    checkpoint = tmp_path / "a-checkpoint-folder-whose-path-is-long-enough-to-pass-80-columns"
    run = piped("train", stores("sbm:2000:4", tiles=4), "--epochs", "2", "--checkpoint", str(checkpoint))
    assert run.returncode == 0, run.stderr
    [timing] = [line for line in run.stdout.splitlines() if "mean epoch time" in line]
    assert "(spmm " in timing and timing.rstrip().endswith("│")
    assert f"{checkpoint} (latest epoch 2, best validation epoch 2)" in run.stdout
    assert "grid 1x1x1 (1 rank, local)" in run.stdout


def test_piped_plan_keeps_its_rows_whole_in_100_columns(stores: StoreFactory) -> None:
    """The plan table was 135 columns wide in a pipe (and at 100 columns, placements split over lines)."""
    run = piped("plan", stores("sbm:2000:4", tiles=4), "--ranks", "4", "--profile", "shipped")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert max(map(len, lines)) <= 100 and "…" not in run.stdout
    rows = [line.split() for line in lines if line[:1].isdigit()]
    assert len(rows) == 6 and all(row[-1] in ("yes", "no") and row[3].endswith(")") for row in rows), lines
