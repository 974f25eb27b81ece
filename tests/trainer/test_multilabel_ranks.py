"""Every rank of a multi-label run computes the same bits of loss and ROC-AUC (so that every rank keeps
the same best model and stops at the same --target-accuracy epoch), on grids that split the tasks, the
rows and both, with bf16 on the wire too. One spawned world of 4 ranks (store -> Trainer on each rank)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gtool.trainer.comm.groups import GridComm
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit.trainer import Trainer, model_grid
from gtool.trainer.launch.local import launch_local
from tests.support.stores import StoreFactory
from tests.trainer.cases import run_world

WORLD = 4
BASE = {"layers": 2, "hidden": 8, "dropout": 0.5, "lr": 0.05}
GRIDS = {"2x1x2": {}, "1x2x2-bf16": {"comm_dtype": "bf16"}, "2x2x1-minibatch": {"batch_size": 150}}


@dataclass(frozen=True)
class RankCase:
    name: str
    config: TrainConfig


def run_case(case: RankCase, comm: GridComm, out: Path) -> None:
    """Two epochs, each evaluated; every figure written as its float's hex (the exact bits)."""
    trainer = Trainer(model_grid(case.config, comm), case.config)
    figures = []
    for epoch in (1, 2):
        record = trainer.train_epoch(epoch)
        figures.append({"loss": record.loss.hex(), **{k: v.hex() for k, v in trainer.evaluate().items()}})
    trainer.close()
    (out / f"{case.name}-rank-{comm.everyone.index}.json").write_text(json.dumps(figures))


@pytest.fixture(scope="module")
def results(stores: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = stores("sbm-multi:301:3:5", tiles=2)  # 5 tasks: padded task columns on 2 bands
    cases = [
        RankCase(name, TrainConfig.of(store, tuple(int(d) for d in name[:5].split("x")), **BASE, **options))
        for name, options in GRIDS.items()
    ]
    out = tmp_path_factory.mktemp("multilabel-ranks")
    launch_local(WORLD, run_world, cases, str(out), run_case)
    return out


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_every_rank_has_the_same_bits_of_loss_and_roc_auc(results: Path, name: str) -> None:
    ranks = [json.loads((results / f"{name}-rank-{rank}.json").read_text()) for rank in range(WORLD)]
    assert all(figures == ranks[0] for figures in ranks[1:]), ranks
    assert all(float.fromhex(epoch["valid"]) > 0 for epoch in ranks[0])
