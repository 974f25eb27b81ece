"""Time to accuracy on real data: `gtool train --target-accuracy` on Cora stops at the first epoch whose
validation accuracy reaches the target and reports the training seconds it took (evaluation excluded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.test_cora import KIPF

pytestmark = pytest.mark.integration  # builds stores / runs the command line

GTOOL = [sys.executable, "-m", "gtool.cli"]


def test_cora_stops_at_the_target_and_reports_the_time_to_reach_it(cora_dir: Path, tmp_path: Path) -> None:
    store, log = tmp_path / "cora.zarr", tmp_path / "log.jsonl"
    shard = subprocess.run(
        [*GTOOL, "shard", str(cora_dir), "-o", str(store), "-t", "2x2", "-q"], capture_output=True
    )
    assert shard.returncode == 0, shard.stderr
    target = ["--target-accuracy", "0.7", "--log", str(log)]
    train = subprocess.run(
        [*GTOOL, "train", str(store), *KIPF, *target], capture_output=True, text=True, timeout=600
    )
    assert train.returncode == 0, train.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    epochs, summary = lines[:-1], lines[-1]["summary"]
    assert len(epochs) < 200, "the target was reached only at the last epoch: lower it"
    assert epochs[-1]["accuracy"]["valid"] >= 0.7 > max(e["accuracy"]["valid"] for e in epochs[:-1])
    assert summary["target_accuracy"] == 0.7 and summary["target_epoch"] == epochs[-1]["epoch"]
    assert summary["target_train_seconds"] == pytest.approx(sum(e["seconds"] for e in epochs))
    assert summary["eval_seconds_per_round"] > 0
    out = " ".join(train.stdout.split())
    reached = f"target validation accuracy 0.7: reached at epoch {summary['target_epoch']} after"
    assert reached in out and "s of training (evaluation excluded); evaluation" in out
