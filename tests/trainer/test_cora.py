"""Real data end to end: Cora sharded by `gtool shard`, trained by `gtool train --grid 2x2x2` (Kipf)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import zarr

from gtool.store.layout import PREDICTIONS_KEY

pytestmark = pytest.mark.integration  # builds stores / runs the command line

KIPF = ["--layers", "2", "--hidden", "16", "--dropout", "0.5", "--lr", "0.01", "--weight-decay", "5e-4"]
KIPF += ["--weight-decay-first-only", "--epochs", "200", "--normalize-features", "row"]


def test_kipf_gcn_on_cora_reaches_published_accuracy(cora_dir: Path, tmp_path: Path) -> None:
    """One seed of the acceptance run (whose mean over seeds 0-4 must reach 80.5%); seed 0 reaches 80.8%."""
    store, log = tmp_path / "cora.zarr", tmp_path / "log.jsonl"
    gtool = [sys.executable, "-m", "gtool.cli"]
    shard = subprocess.run(
        [*gtool, "shard", str(cora_dir), "-o", str(store), "-t", "4x4", "-q"], capture_output=True, text=True
    )
    assert shard.returncode == 0, shard.stderr
    checkpoint, predictions = tmp_path / "ck", tmp_path / "predictions.zarr"
    train = subprocess.run(
        [*gtool, "train", str(store), "--grid", "2x2x2", *KIPF, "--seed", "0", "--log", str(log)]
        + ["--checkpoint", str(checkpoint), "--checkpoint-every", "50"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert train.returncode == 0, train.stderr
    summary = json.loads(log.read_text().splitlines()[-1])["summary"]
    assert summary["test_at_best_valid"] >= 0.80, summary
    assert len(summary["peak_memory_mb"]) == 8
    best = summary["best_epoch"]
    assert summary["checkpoint"] == f"{checkpoint} (latest epoch 200, best validation epoch {best})"
    assert best < 200, "the last epoch is the best: the test would not tell the best model from the latest"

    # predict takes the best-validation model, which the checkpoints keep beside the latest (it took the
    # latest: 0.796 on Cora where the summary said 0.810)
    predict = subprocess.run(
        [
            *gtool,
            "predict",
            str(store),
            "--checkpoint",
            str(checkpoint),
            "-o",
            str(predictions),
            "--grid",
            "2x2x2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert predict.returncode == 0, predict.stderr
    assert f"(epoch {best}, the best validation model)" in predict.stdout
    accuracy = zarr.open_group(str(predictions), mode="r").attrs[PREDICTIONS_KEY]["accuracy"]
    assert accuracy["test"] == summary["test_at_best_valid"] and accuracy["valid"] == summary["best_valid"]
