"""An epoch dispatches the same operators whatever the graph's size (no Python loop over nodes) and none
that makes the host wait for the device (.item(), nonzero, ...)."""

from __future__ import annotations

from collections import Counter

from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.trainer import Trainer, model_grid
from tests.support.operators import WAITS_FOR_DEVICE, OperatorLog
from tests.support.stores import StoreFactory
from tests.trainer.cases import single_rank_comm


def epoch_operators(store: str) -> Counter[str]:
    """The operators of one training step (dropout 0.5, 3 layers, 1x1x1) after a warm-up step."""
    config = TrainConfig.of(store, hidden=8, dropout=0.5, agg_blocks=2)
    trainer = Trainer(model_grid(config, single_rank_comm()), config)
    trainer.step(1)
    with OperatorLog() as log:
        trainer.step(2)
    return log.calls


def test_an_epoch_dispatches_the_same_operators_on_a_16x_larger_graph(stores: StoreFactory) -> None:
    shape = {"tiles": 2, "num_features": 6, "num_classes": 3}
    small = epoch_operators(stores("grid:8x8", **shape))
    large = epoch_operators(stores("grid:32x32", **shape))
    assert small == large
    assert sum(small.values()) < 200, small
    assert not WAITS_FOR_DEVICE & set(small), "the step waits for the device"
