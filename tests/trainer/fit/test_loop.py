"""The epochs of a run: divergence stops it, a store without validation nodes is said so."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from gtool.errors import GtoolError
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit import loop
from gtool.trainer.fit.report import EpochRecord, History, Reporter, Summary
from tests.trainer.cases import single_rank_comm

CPU = torch.device("cpu")


def test_a_diverged_loss_stops_the_run_before_its_checkpoint(tmp_path, monkeypatch) -> None:
    """A NaN loss (an lr too high) trained on to the end, exit 0, and replaced the last good checkpoint."""
    losses = {1: 1.5, 2: math.nan, 3: math.nan}
    trainer = SimpleNamespace(
        config=TrainConfig.of("s", epochs=3, checkpoint=str(tmp_path), checkpoint_every=1),
        comm=single_rank_comm(),
        train_epoch=lambda epoch: EpochRecord(epoch, losses[epoch], 0.0, 0.0, 0.0, 0.0),
        evaluate=lambda: {"train": 0.5, "valid": 0.5, "test": 0.5},
        metric="accuracy",
        state=lambda: {"model": {}},
        model_copy=lambda: {"model": {}, "places": {}},  # the best model's parts (none here)
    )
    monkeypatch.setattr(loop, "checkpoint_shape", lambda trainer: {"grid": [1, 1, 1]})
    with pytest.raises(GtoolError, match="the loss is nan at epoch 2: training diverged"):
        loop.fit(trainer, Reporter(False, None, append=False), CPU)
    assert json.loads((tmp_path / "latest.json").read_text())["epoch"] == 1


def test_a_store_without_validation_nodes_is_said_so_not_nan(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary said 'best validation accuracy nan (epoch 1)'."""
    history = History()
    records = [
        EpochRecord(e, 1.0, 0.1, 0.0, 0.0, 0.0, {"train": 0.5, "valid": math.nan, "test": 0.4})
        for e in (1, 2)
    ]
    for record in records:
        history.update(record)
    assert history.best_valid is None
    Reporter(True, None, append=False).summary(Summary(history, records))
    assert "n/a (the store has no validation nodes)" in " ".join(capsys.readouterr().out.split())
    Reporter(True, None, append=False).summary(Summary(History(), []))
    assert "n/a (no evaluation yet)" in " ".join(capsys.readouterr().out.split())


def scripted_trainer(tmp_path, valid: dict[int, float], **options) -> SimpleNamespace:
    """A trainer whose epochs take 0.5 s each and whose validation accuracy at epoch e is valid[e]."""
    current = {}

    def train_epoch(epoch: int) -> EpochRecord:
        current["epoch"] = epoch
        return EpochRecord(epoch, 1.0, 0.5, 0.0, 0.0, 0.0)

    return SimpleNamespace(
        config=TrainConfig.of("s", checkpoint=str(tmp_path), checkpoint_every=100, **options),
        comm=single_rank_comm(),
        train_epoch=train_epoch,
        evaluate=lambda: {"train": 1.0, "valid": valid[current["epoch"]], "test": 0.5},
        metric="accuracy",
        model_copy=lambda: {"model": {}, "places": {}},
        state=lambda: {"model": {}, "places": {}},
        load_state=lambda state: None,
    )


def test_target_accuracy_stops_at_the_first_evaluation_that_reaches_it(tmp_path, monkeypatch, capsys) -> None:
    """Evaluated every 2 epochs: 0.79 at epoch 4 misses 0.8, 0.8 at epoch 6 reaches it (0.9 at 5 is not
    evaluated); 6 epochs of 0.5 s of training; the checkpoint is the stopping epoch's."""
    valid = {2: 0.5, 4: 0.79, 5: 0.9, 6: 0.8}
    trainer = scripted_trainer(tmp_path, valid, epochs=20, eval_every=2, target_accuracy=0.8)
    shape = {"grid": [1, 1, 1], "dims": [3, 2]}
    monkeypatch.setattr(loop, "checkpoint_shape", lambda trainer: shape)
    log = tmp_path / "log.jsonl"
    summary = loop.fit(trainer, Reporter(True, str(log), append=False), CPU)
    assert [record.epoch for record in summary.epochs] == [1, 2, 3, 4, 5, 6]
    assert json.loads((tmp_path / "latest.json").read_text())["epoch"] == 6
    history = summary.history
    assert (history.target_epoch, history.target_seconds, history.evaluations) == (6, 3.0, 3)
    out = " ".join(capsys.readouterr().out.split())
    assert "validation accuracy reached the target 0.8 at epoch 6: stopping" in out
    assert (
        "target validation accuracy 0.8: reached at epoch 6 after 3.000s of training (evaluation excluded)"
        in out
    )
    logged = json.loads(log.read_text().splitlines()[-1])["summary"]
    assert (logged["target_accuracy"], logged["target_epoch"], logged["target_train_seconds"]) == (
        0.8,
        6,
        3.0,
    )
    assert logged["eval_seconds_per_round"] >= 0
    resumed = scripted_trainer(tmp_path, valid, epochs=20, eval_every=2, target_accuracy=0.8, resume=True)
    summary = loop.fit(resumed, Reporter(True, None, append=False), CPU)
    assert summary.epochs == [] and summary.history.target_seconds == 3.0
    assert "the target 0.8 was reached at epoch 6: nothing left to train" in capsys.readouterr().out


def test_a_target_never_reached_is_said_so(tmp_path, monkeypatch, capsys) -> None:
    trainer = scripted_trainer(tmp_path, {1: 0.5, 2: 0.6, 3: 0.7}, epochs=3, target_accuracy=0.95)
    monkeypatch.setattr(loop, "checkpoint_shape", lambda trainer: {"grid": [1, 1, 1]})
    summary = loop.fit(trainer, Reporter(True, None, append=False), CPU)
    assert len(summary.epochs) == 3 and summary.history.target_epoch is None
    out = " ".join(capsys.readouterr().out.split())
    assert "target validation accuracy 0.95: not reached in 3 epochs (best 0.7000)" in out
