"""Training options validated where they are declared."""

from __future__ import annotations

import pytest

from gtool.trainer.config import TrainConfig


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="--layers must be >= 1"):
        TrainConfig.of("s", layers=0)
    with pytest.raises(ValueError, match="--optimizer must be one of"):
        TrainConfig.of("s", algorithm="sgd")
    not_finite = r"--dropout must be a finite number, got inf; --lr must be a finite number, got nan"
    with pytest.raises(ValueError, match=not_finite):  # nan passes every bound; an inf timeout overflowed
        TrainConfig.of("s", lr=float("nan"), dropout=float("inf"))
    with pytest.raises(ValueError, match="--overwrite needs --checkpoint DIR"):
        TrainConfig.of("s", overwrite=True)
    with pytest.raises(ValueError, match="--overwrite replaces the checkpoint that --resume continues"):
        TrainConfig.of("s", checkpoint="ck", overwrite=True, resume=True)


def test_target_accuracy_is_a_fraction() -> None:
    with pytest.raises(ValueError, match="--target-accuracy must be at most 1"):
        TrainConfig.of("s", target_accuracy=81.5)
    with pytest.raises(ValueError, match="--target-accuracy must be > 0"):
        TrainConfig.of("s", target_accuracy=0.0)
    assert TrainConfig.of("s", target_accuracy=1.0).runtime.target_accuracy == 1.0


def test_dropout_defaults_to_the_modes_rate_and_keeps_a_given_one() -> None:
    """0.5 for full-graph epochs, 0.1 for mini-batch steps (their sampling already regularizes); a rate
    given is kept in either mode."""
    assert TrainConfig.of("s").model.dropout == 0.5
    assert TrainConfig.of("s", batch_size=100).model.dropout == 0.1
    assert TrainConfig.of("s", batch_size=100, dropout=0.3).model.dropout == 0.3
    assert TrainConfig.of("s", dropout=0.0).model.dropout == 0.0
