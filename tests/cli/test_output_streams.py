"""Every command writes its result to stdout and its diagnostics (progress, notices, errors) to stderr, so
that `gtool info STORE > f` puts the table in f; with -q a command that shows progress shows none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stores import StoreFactory

pytestmark = pytest.mark.integration  # runs the command line on stores


def gtool(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "gtool.cli", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "100"}
    )


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("sbm:600:3", tiles=2)


def test_shard_prints_its_summary_on_stdout_and_progress_on_stderr(tmp_path: Path) -> None:
    run = gtool("shard", "grid:6x6", "--tiles", "2x2", "-w", "1", "-o", str(tmp_path / "s.zarr"))
    assert run.returncode == 0, run.stderr
    assert "gtool shard:" in run.stdout and "nonzeros" in run.stdout and "nonzeros" not in run.stderr
    assert "map edges" in run.stderr  # the stages' progress
    quiet = gtool("shard", "grid:6x6", "--tiles", "2x2", "-w", "1", "-q", "-o", str(tmp_path / "q.zarr"))
    assert quiet.returncode == 0 and quiet.stderr == "" and "gtool shard:" in quiet.stdout


@pytest.mark.parametrize(
    "args, shown",
    [
        (["info"], "num_nodes"),
        (["verify"], "no problems found"),
        (["stats"], "tile nonzeros"),
        (["plan", "--ranks", "2"], "1x2x1"),
    ],
    ids=["info", "verify", "stats", "plan"],
)
def test_a_report_goes_to_stdout(store: str, args: list[str], shown: str) -> None:
    run = gtool(args[0], store, *args[1:])
    assert run.returncode == 0, run.stderr
    assert shown in run.stdout and shown not in run.stderr


def test_json_is_stdout_alone(store: str) -> None:
    for command in ("info", "stats"):
        run = gtool(command, store, "--json")
        assert run.returncode == 0 and json.loads(run.stdout)


def test_an_error_goes_to_stderr_alone(tmp_path: Path) -> None:
    for args in (["info", str(tmp_path / "none.zarr")], ["shard", "grid:3x3", "--seed", "x"]):
        run = gtool(*args)
        assert run.returncode == 2 and run.stdout == "" and run.stderr.startswith("error: ")


def test_cache_list_prints_its_one_line_on_stdout(tmp_path: Path) -> None:
    run = gtool("cache", "list", "--cache-dir", str(tmp_path))
    assert run.returncode == 0 and run.stdout == f"nothing cached in {tmp_path} (given by --cache-dir)\n"
    assert run.stderr == ""


def test_train_and_predict_quiet_print_only_their_result(store: str, tmp_path: Path) -> None:
    """Two local ranks, started without a word under -q; the summaries are the results."""
    checkpoint = str(tmp_path / "ck")
    model = ["--layers", "2", "--hidden", "8", "--epochs", "2", "--checkpoint", checkpoint]
    quiet = gtool("train", store, *model, "-q", "--grid", "1x1x2")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "epoch    1" not in quiet.stdout and "best validation accuracy" in quiet.stdout
    out = tmp_path / "p.zarr"
    predicted = gtool("predict", store, "--checkpoint", checkpoint, "-o", str(out), "-q", "--grid", "1x1x2")
    assert predicted.returncode == 0 and predicted.stderr == "", predicted.stderr
    assert f"gtool predict: wrote {out}" in predicted.stdout
