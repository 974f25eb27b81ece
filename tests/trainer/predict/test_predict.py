"""`gtool predict`: a checkpoint's model on other grids gives the serial model's logits, in node order.

One spawned world of 6 ranks trains three models with checkpoints (float32 on 2x1x2; float64 with learned
features on 2x2x1; the ScaleGNN stack on 2x1x2) and predicts from each on other grids, one uneven
(3x2x1, N = 77); the test compares the written arrays with the serial model trained the same way on
the unpermuted graph.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.store.chunks import has_checksums
from gtool.store.layout import PREDICTIONS_KEY
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.local import launch_local
from gtool.trainer.models.serial import SerialGCN
from tests.support.stores import StoreFactory
from tests.trainer.prediction_runs import Training, run_trainings
from tests.trainer.references import unpermuted_reference

WORLD, EPOCHS = 6, 4
SHAPE = {"tiles": 3, "seed": 5, "num_features": 11, "num_classes": 5, "perm": "double"}
"""The store of the parallel-equivalence tests' double permutation (shared with them)."""
MODELS = {  # name: (training grid, options, prediction grids with whether to write embeddings)
    "float32": ((2, 1, 2), {}, {"3x2x1": ((3, 2, 1), True), "1x1x1": ((1, 1, 1), False)}),
    "learned": (
        (2, 2, 1),
        {"learnable_features": True, "dtype": "float64", "normalize_features": "row"},
        {"3x2x1": ((3, 2, 1), False)},
    ),
    "scalegnn": (
        (2, 1, 2),
        {"model": "scalegnn", "dtype": "float64"},
        {"3x2x1": ((3, 2, 1), True), "1x2x2": ((1, 2, 2), False)},
    ),
}
BASE = {"hidden": 7, "layers": 3, "dropout": 0.0, "lr": 0.05, "epochs": EPOCHS}


@pytest.fixture(scope="module")
def runs(
    stores: StoreFactory, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, TrainConfig]]:
    store = stores("grid:7x11", **SHAPE)
    root = tmp_path_factory.mktemp("predict")
    configs, trainings = {}, []
    for name, (grid, options, predictions) in MODELS.items():
        runtime = {"checkpoint": str(root / name / "checkpoints"), "log": str(root / name / "log.jsonl")}
        configs[name] = TrainConfig.of(store, grid, **BASE, **options, **runtime)
        outputs = {str(root / name / grid_name): spec for grid_name, spec in predictions.items()}
        trainings.append(Training(configs[name], outputs))
    launch_local(WORLD, run_trainings, trainings)
    return root, configs


def _serial_logits(config: TrainConfig) -> tuple[torch.Tensor, torch.Tensor, SerialGCN]:
    """The serial model trained as the run was, on the unpermuted graph: its logits, its last hidden layer
    (the last layer's input) and the model."""
    reference = unpermuted_reference(config.store, config.model.layers, config.torch_dtype)
    serial = SerialGCN(reference.graph, config)
    for epoch in range(1, EPOCHS + 1):
        serial.train_epoch(epoch)
    with torch.no_grad():
        hidden, logits = serial.hidden_and_logits(0, training=False)
        return logits, hidden, serial


def _relative_error(got: np.ndarray, want: torch.Tensor) -> float:
    return float(np.abs(got - want.numpy()).max() / want.abs().max())


@pytest.mark.parametrize(
    ("model", "grid"), [(m, g) for m, (_, _, predictions) in MODELS.items() for g in predictions]
)
def test_predictions_equal_the_serial_model(runs: tuple, model: str, grid: str) -> None:
    """Logits (and embeddings) in the original node order within 1e-5 of the serial model's, written with
    checksums, published complete; their argmax scores what training reported after its last epoch."""
    root, configs = runs
    config = configs[model]
    out = root / model / grid
    group = zarr.open_group(str(out), mode="r")
    assert group.attrs[PREDICTIONS_KEY]["complete"] is True
    assert not (root / model / f".{grid}.partial").exists()
    logits, hidden, serial = _serial_logits(config)
    written = group["logits"]
    assert has_checksums(written) and written.dtype == np.dtype(config.model.dtype)
    assert _relative_error(written[:], logits) <= 1e-5
    if MODELS[model][2][grid][1]:
        assert _relative_error(group["embeddings"][:], hidden) <= 1e-5
    labels, masks = serial.graph.labels.numpy(), {k: v.numpy() for k, v in serial.masks.items()}
    correct = written[:].argmax(axis=1) == labels
    scored = {split: float(correct[mask].mean()) for split, mask in masks.items()}
    log = [json.loads(line) for line in Path(config.runtime.log).read_text().splitlines()]
    reported = [line for line in log if "epoch" in line][-1]["accuracy"]
    assert scored == pytest.approx(reported, abs=1e-12)
    assert group.attrs[PREDICTIONS_KEY]["accuracy"] == pytest.approx(reported, abs=1e-12)


def test_command_line_predicts_and_refuses_what_it_cannot(runs: tuple, tmp_path: Path) -> None:
    """`gtool predict` on one rank (in its own process) writes the same logits; an existing output needs
    --overwrite; a checkpoint that lacks a rank's part fails naming it and leaves the old output as it was."""
    root, configs = runs
    config = configs["float32"]
    gtool = [sys.executable, "-m", "gtool.cli", "predict", config.store, "--use", "latest"]
    checkpoint = Path(config.runtime.checkpoint)
    out = tmp_path / "out.zarr"
    run = subprocess.run(
        [*gtool, "--checkpoint", str(checkpoint), "-o", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "wrote" in run.stdout and "accuracy: train" in run.stdout
    want = zarr.open_group(str(root / "float32" / "1x1x1"), mode="r")["logits"][:]
    np.testing.assert_array_equal(zarr.open_group(str(out), mode="r")["logits"][:], want)

    again = subprocess.run(
        [*gtool, "--checkpoint", str(checkpoint), "-o", str(out)], capture_output=True, text=True
    )
    assert again.returncode == 2 and "already exists; pass --overwrite" in again.stderr
    assert "in Python" not in again.stderr  # the command line's error spoke of overwrite=True

    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    part = next(broken.glob("epoch-*/rank-00003.pt"))
    part.unlink()
    failed = subprocess.run(
        [*gtool, "--checkpoint", str(broken), "-o", str(out), "--overwrite"], capture_output=True, text=True
    )
    assert failed.returncode == 2 and "rank-00003.pt missing" in failed.stderr
    np.testing.assert_array_equal(zarr.open_group(str(out), mode="r")["logits"][:], want)


def test_grid_auto_predicts_on_the_planned_grid_of_the_ranks(
    runs: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--grid auto --ranks P`: gtool plan's grid of P ranks for the checkpoint's model; --ranks alone is
    refused."""
    config = runs[1]["float32"]
    jobs: list = []
    monkeypatch.setattr("gtool.trainer.predict.job.predict", jobs.append)
    args = ["predict", config.store, "--checkpoint", config.runtime.checkpoint, "-o", str(tmp_path / "p")]
    done = CliRunner().invoke(app, [*args, "--grid", "auto", "--ranks", "4"])
    assert done.exit_code == 0, done.output
    assert "--grid auto chose" in done.output and np.prod(jobs[0].config.grid) == 4
    alone = CliRunner().invoke(app, [*args, "--ranks", "4"])
    assert alone.exit_code == 2 and "--ranks goes with --grid auto" in alone.output
