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
        state=lambda: {"model": {}},
        model=SimpleNamespace(state=dict),  # the best model's parts (none here)
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
