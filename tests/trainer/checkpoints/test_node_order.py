"""Learned features are saved by position: a store of the same options but other node positions (the same
graph plus one edge, --perm balanced) is refused by `gtool train --resume` and `gtool predict`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gtool
from gtool.cli.main import app
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line

N = 300
BALANCED = {"perm": "balanced", "tiles": 2, "seed": 0, "num_nodes": N, "num_features": 8}


def edge_file(path: Path, extra: list[tuple[int, int]]) -> str:
    """A random graph's edge list, plus `extra` edges."""
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, 1500), rng.integers(0, N, 1500)
    edges = np.concatenate([np.stack([src, dst], 1), np.array(extra, dtype=np.int64).reshape(-1, 2)])
    np.savetxt(path, edges, fmt="%d")
    return str(path)


def test_one_more_edge_moves_nodes_and_is_refused(tmp_path: Path) -> None:
    first = make_store(edge_file(tmp_path / "g.txt", []), tmp_path / "g.zarr", **BALANCED)
    other = make_store(edge_file(tmp_path / "g1.txt", [(0, 1)]), tmp_path / "g1.zarr", **BALANCED)
    orders = [gtool.open_store(path).meta.node_order for path in (first, other)]
    options = {key: value for key, value in orders[1].items() if key != "digest"}
    assert options == {"scheme": "balanced", "seed": 0, "tiles": 2}
    assert orders[1]["digest"] != orders[0]["digest"]
    moved = np.mean(gtool.open_store(first).perm("c") != gtool.open_store(other).perm("c"))
    assert moved > 0.1  # what learned features saved by position would have met

    checkpoints = tmp_path / "ck"
    model = ["--grid", "1x1x1", "--learnable-features", "--checkpoint", str(checkpoints)]
    run = [sys.executable, "-m", "gtool.cli", "train", first, "--epochs", "2", *model]
    trained = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert trained.returncode == 0, trained.stderr
    latest = (checkpoints / "latest.json").read_bytes()

    digests = (orders[0]["digest"][:8], orders[1]["digest"][:8])
    expected = (
        "node_order: checkpoint --perm balanced --seed 0 --tiles 2 (permutations digest {}) vs run --perm "
        "balanced --seed 0 --tiles 2 (permutations digest {})"
    ).format(*digests)
    for args in (  # both refused before any rank starts
        ["train", other, "--epochs", "3", "--resume", *model],
        ["predict", other, "--checkpoint", str(checkpoints), "-o", str(tmp_path / "p")],
    ):
        refused = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
        assert refused.exit_code == 2, refused.output
        assert refused.output.startswith("error: ") and expected in " ".join(refused.output.split())
    assert (checkpoints / "latest.json").read_bytes() == latest
    assert json.loads(latest)["epoch"] == 2 and not (checkpoints / "epoch-000003").exists()
    assert not (tmp_path / "p").exists()
