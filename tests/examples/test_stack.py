"""examples/stack.py, a user's model, trains through `gtool train --model FILE.py:NAME` as gtool's own do:
its per-epoch losses equal its serial twin's (plain PyTorch on the unpermuted graph, built from the blocks'
twins) on 1x1x1, 2x2x2 and 3x2x1 (N = 2000, which 3 bands do not divide); mini-batch losses are the same
on every grid; a checkpoint then --resume equals an uninterrupted run; predict on another grid writes the
forward pass's logits; a wrong model is one error line before any rank trains."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr

import gtool
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.trainer import model_grid
from gtool.trainer.models.serial import (
    SerialBias,
    SerialContext,
    SerialGCNConv,
    SerialGraph,
    SerialLinear,
    SerialNormReluDropout,
)
from gtool.trainer.models.user import user_model
from tests.support.stores import StoreFactory
from tests.trainer.cases import single_rank_comm

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "stack.py"
MODEL = f"{EXAMPLE}:build"
FLAGS = ["--dtype", "float64", "--dropout", "0", "--weight-decay", "0", "--hidden", "8", "--lr", "0.01"]
EPOCHS = 4
RELATIVE = 1e-5


@pytest.fixture(scope="module")
def graph(stores: StoreFactory) -> str:
    return stores("sbm:2000:4", tiles=4)


def train(store: str, folder: Path, grid: str, *extra: str) -> list[float]:
    """`gtool train --model examples/stack.py:build` on `grid`; its logged per-epoch losses."""
    log = folder / f"log-{grid}-{len(extra)}.jsonl"
    log.unlink(missing_ok=True)
    command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid, "--model", MODEL]
    command += [*FLAGS, "--epochs", str(EPOCHS), "--log", str(log), *extra]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=folder)
    assert run.returncode == 0, run.stderr[-3000:]
    return [r["loss"] for r in map(json.loads, log.read_text().splitlines()) if "loss" in r]


class SerialExample(torch.nn.Module):
    """examples/stack.py's model from the serial twins of its blocks, with its initial weights."""

    def __init__(self, weights: dict[str, torch.Tensor]):
        super().__init__()
        ones = torch.ones(weights["conv0"].shape[1], dtype=torch.float64)
        self.conv0, self.conv1 = SerialGCNConv(weights["conv0"], 0), SerialGCNConv(weights["conv1"], 1)
        self.act0 = SerialNormReluDropout(0.0, 0, 0, ones.clone())
        self.act1 = SerialNormReluDropout(0.0, 0, 0, ones.clone())
        self.conv2, self.bias2 = SerialGCNConv(weights["conv2"], 2), SerialBias(torch.zeros_like(ones))
        self.head = SerialLinear(weights["head"])

    def forward(self, x: torch.Tensor, context: SerialContext) -> torch.Tensor:
        h0 = self.act0(self.conv0(x, context), context)
        h1 = self.act1(self.conv1(h0, context), context, residual=h0)
        return self.head(torch.relu(self.bias2(self.conv2(h1, context))))


@functools.cache
def serial_losses(store: str) -> list[float]:
    """The twin's per-epoch losses: the initial weights are the example's on a 1x1x1 grid (they do not
    depend on the grid), the graph the unpermuted one."""
    config = TrainConfig.of(store=store, hidden=8, dropout=0.0, dtype="float64")
    grid = model_grid(config, single_rank_comm())
    built = user_model(MODEL, grid)
    weights = {
        name: getattr(built, name).sharded.full().detach()[: block.input.width, : block.output.width]
        for name in ("conv0", "conv1", "conv2", "head")
        for block in [getattr(built, name)]
    }
    opened = gtool.open_store(store)
    labels, split = gtool.labels(opened), gtool.split(opened)
    adjacency, features = gtool.to_scipy(opened), gtool.features(opened)
    serial = SerialGraph.from_scipy(adjacency, features, labels, split, 4, 3, torch.float64)
    twin = SerialExample(weights)
    optimizer = torch.optim.Adam(twin.parameters(), lr=0.01)
    train_nodes = torch.from_numpy((split == 0) & (labels >= 0))
    targets = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    context = SerialContext(serial, 1, None, False)
    losses = []
    for _ in range(EPOCHS):
        optimizer.zero_grad()
        logits = twin(serial.features, context)
        loss = torch.nn.functional.cross_entropy(logits[train_nodes], targets[train_nodes])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_equal(losses: list[float], want: list[float]) -> None:
    assert len(losses) == len(want) == EPOCHS
    for got, expected in zip(losses, want, strict=True):
        assert abs(got - expected) <= RELATIVE * abs(expected), (losses, want)


def test_the_example_trains_like_its_serial_twin_on_every_grid(graph: str, tmp_path: Path) -> None:
    serial = serial_losses(graph)
    assert serial[-1] < serial[0]  # it learns
    for grid in ("1x1x1", "2x2x2", "3x2x1"):
        assert_equal(train(graph, tmp_path, grid), serial)


def test_mini_batches_of_the_example_are_the_same_on_every_grid(graph: str, tmp_path: Path) -> None:
    batches = ["--batch-size", "500"]
    alone = train(graph, tmp_path, "1x1x1", *batches)
    assert_equal(train(graph, tmp_path, "2x2x2", *batches), alone)


def test_a_checkpoint_resumes_and_predicts_as_the_run_goes_on(graph: str, tmp_path: Path) -> None:
    """2 epochs, then --resume to the last: the uninterrupted run's losses, which are the serial twin's on
    every grid (the test above); the resumed run's checkpoint predicts alike on two grids."""
    first = train(graph, tmp_path, "2x1x1", "--checkpoint", str(tmp_path / "whole"), "--epochs", "2")
    rest = train(graph, tmp_path, "2x1x1", "--checkpoint", str(tmp_path / "whole"), "--resume")
    assert_equal(first + rest, serial_losses(graph))
    outputs = {}
    for grid in ("1x2x1", "1x1x1"):
        out = tmp_path / f"predicted-{grid}"
        command = [
            sys.executable,
            "-m",
            "gtool.cli",
            "predict",
            graph,
            "--checkpoint",
            str(tmp_path / "whole"),
        ]
        command += ["-o", str(out), "--grid", grid, "--use", "latest"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        outputs[grid] = np.asarray(zarr.open_group(str(out), mode="r")["logits"][:])
    assert outputs["1x1x1"].shape == (2000, 4)
    np.testing.assert_allclose(outputs["1x2x1"], outputs["1x1x1"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("missing.py:build", "no file"),
        (f"{EXAMPLE}:nothing", "defines no nothing"),
        ("{bad}:build", "not a torch.nn.Module"),
        ("{narrow}:build", "the model's output has 3 columns"),
    ],
)
def test_a_wrong_model_is_one_error_line(graph: str, tmp_path: Path, spec: str, error: str) -> None:
    (tmp_path / "bad.py").write_text("def build(grid):\n    return 3\n")
    narrow = "from gtool.trainer import Linear\n\ndef build(grid):\n    return Linear(grid, grid.input, 3)\n"
    (tmp_path / "narrow.py").write_text(narrow)
    spec = spec.format(bad=tmp_path / "bad.py", narrow=tmp_path / "narrow.py")
    command = [sys.executable, "-m", "gtool.cli", "train", graph, "--model", spec, "--epochs", "1"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and error in lines[0], run.stderr[-2000:]
    assert "Traceback" not in run.stderr
