"""Multi-label stores trained the way a user trains them: `gtool train` on a synthetic graph whose binary
tasks follow its communities reaches a high test ROC-AUC, every grid trains to the 1x1x1 losses (full
graph and mini-batch), an ogbn-proteins folder written by ogb's DatasetSaver shards and trains, and
`gtool predict` writes each task's probability and reports ROC-AUC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from gtool.store.layout import PREDICTIONS_KEY
from tests.preprocess.sources.ogb.test_ogb_proteins import TASKS, save_proteins
from tests.support.stores import StoreFactory

pytestmark = pytest.mark.integration  # builds stores / runs the command line

GTOOL = [sys.executable, "-m", "gtool.cli"]
MODEL = ["--layers", "2", "--hidden", "32", "--lr", "0.05", "--dropout", "0.2"]
SPLITS = ("train", "valid", "test")


def gtool(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([*GTOOL, *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def log_lines(log: Path) -> tuple[list[dict], dict]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return lines[:-1], lines[-1]["summary"]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    """2999 nodes (no band count divides them), 4 communities, 7 tasks (padded task columns on 2 bands)."""
    return stores("sbm-multi:2999:4:7", tiles=2)


@pytest.fixture(scope="module")
def single_rank_run(store: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict, str]:
    """60 epochs on 1x1x1: the epochs' and the summary's log lines, and what it printed."""
    log = tmp_path_factory.mktemp("multilabel") / "log.jsonl"
    result = gtool("train", store, *MODEL, "--epochs", "60", "--log", str(log))
    return *log_lines(log), " ".join(result.stdout.split())


def test_tasks_that_follow_communities_reach_a_high_test_roc_auc(single_rank_run: tuple) -> None:
    epochs, summary, text = single_rank_run
    assert summary["metric"] == "rocauc" and summary["test_at_best_valid"] >= 0.9, summary
    assert all(epoch["accuracy"] is None for epoch in epochs)
    assert all({f"{split}_rocauc" for split in SPLITS} <= set(epoch) for epoch in epochs)
    assert "2999 nodes" in text and "7 binary tasks (multi-label)" in text
    assert "valid_rocauc" in text and "best validation ROC-AUC" in text and "test ROC-AUC at best" in text


@pytest.mark.parametrize("mode", [[], ["--batch-size", "1000"]], ids=["full-graph", "mini-batch"])
def test_every_grid_trains_to_the_single_rank_losses(
    store: str, single_rank_run: tuple, tmp_path: Path, mode: list[str]
) -> None:
    """2x1x2 splits the tasks over 2 class bands (one padded) and the rows over 2 row bands. Full-graph,
    its first epochs are those of the 60-epoch run (--epochs changes no epoch's training)."""
    runs = {} if mode else {"1x1x1": single_rank_run[0][:4]}
    for grid in ("1x1x1", "2x1x2") if mode else ("2x1x2",):
        log = tmp_path / f"{grid}.jsonl"
        gtool("train", store, *MODEL, *mode, "--epochs", "4", "--grid", grid, "--log", str(log))
        runs[grid] = log_lines(log)[0]
    for single, split in zip(runs["1x1x1"], runs["2x1x2"], strict=True):
        assert split["loss"] == pytest.approx(single["loss"], rel=1e-5)
        for name in SPLITS:
            assert split[f"{name}_rocauc"] == pytest.approx(single[f"{name}_rocauc"], rel=1e-4)


def test_an_ogbn_proteins_folder_shards_trains_and_predicts_task_probabilities(tmp_path: Path) -> None:
    folder, _, _ = save_proteins(tmp_path)
    store, log, checkpoints = tmp_path / "proteins.zarr", tmp_path / "log.jsonl", tmp_path / "ckpt"
    gtool("shard", str(folder), "-o", str(store), "--tiles", "2x2", "-q", "-w", "1")
    train = ["--epochs", "3", "--grid", "2x1x1", "--log", str(log), "--checkpoint", str(checkpoints)]
    gtool("train", str(store), "--layers", "2", "--hidden", "8", *train)
    epochs, summary = log_lines(log)
    assert summary["metric"] == "rocauc" and 0 <= summary["best_valid"] <= 1, summary
    out = tmp_path / "predictions.zarr"
    result = gtool("predict", str(store), "--checkpoint", str(checkpoints), "-o", str(out), "--grid", "1x2x1")
    group = zarr.open_group(str(out), mode="r")
    logits, probabilities = group["logits"][:], group["probabilities"][:]
    assert probabilities.shape == logits.shape and logits.shape[1] == TASKS
    np.testing.assert_allclose(probabilities, 1 / (1 + np.exp(-logits.astype(np.float64))), rtol=1e-6)
    reported = group.attrs[PREDICTIONS_KEY]["rocauc"]  # of the best validation model, the default
    best = epochs[summary["best_epoch"] - 1]
    for name in SPLITS:
        assert reported[name] == pytest.approx(best[f"{name}_rocauc"], rel=1e-5)
    assert "ROC-AUC: train" in result.stdout
