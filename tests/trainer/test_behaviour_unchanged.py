"""`gtool train` logs the losses it logged before the package layout change (issue 19), on 1x1x1 and 2x2x2.

The expected losses were logged by gtool at commit 7126564 (before the change) for the store and flags below;
the store itself is held to that commit's bytes by tests/preprocess's store digests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stores import StoreFactory

FLAGS = ["--epochs", "4", "--hidden", "16", "--layer-order", "aggregate-first"]
LOSSES = {
    "1x1x1": [1.3897478580474854, 1.3870078325271606, 1.3829448223114014, 1.3811678886413574],
    "2x2x2": [1.3897478580474854, 1.387007713317871, 1.3829448223114014, 1.3811681270599365],
}


@pytest.mark.parametrize("grid", sorted(LOSSES))
def test_losses_are_those_logged_before(stores: StoreFactory, tmp_path: Path, grid: str) -> None:
    store = stores("sbm:3000:4", tiles=4)
    log = tmp_path / "log.jsonl"
    command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid, *FLAGS, "--log", str(log)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses == pytest.approx(LOSSES[grid], rel=1e-6, abs=0)
