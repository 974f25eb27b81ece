"""numba starts only in runs that use its kernels: a short run on a small graph takes dropout's torch
specification, trains exactly as with the kernels and never imports numba; a run that uses them starts
numba before its first epoch."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
import torch

from gtool.store.reader import open_store
from gtool.trainer.config import TrainConfig
from gtool.trainer.fit import trainer as fit_trainer
from gtool.trainer.fit.trainer import Trainer, model_grid, uses_cpu_kernels
from gtool.trainer.launch.numba_start import SPEC_SECONDS_PER_ELEMENT, START_SECONDS, kernels_pay
from gtool.trainer.models.network import mask_elements
from tests.support.imports import REPORTING_GTOOL, imported
from tests.support.stores import StoreFactory
from tests.trainer.cases import single_rank_comm

CPU = torch.device("cpu")
PAYING = int(START_SECONDS / SPEC_SECONDS_PER_ELEMENT) + 1
"""Mask elements over a run from which the kernels pay for numba's start."""


def forget_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as one that has not imported numba (whether or not the test process has)."""
    monkeypatch.delitem(sys.modules, "numba", raising=False)


def test_the_kernels_pay_once_numba_is_in_the_process_or_the_masks_are_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "numba", importlib.import_module("numba"))
    assert kernels_pay(1)
    monkeypatch.delitem(sys.modules, "numba")
    assert not kernels_pay(PAYING - 2)
    assert kernels_pay(PAYING)


def test_a_run_decides_from_its_epochs_and_masks_and_always_takes_them_for_the_norm_and_samples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forget_numba(monkeypatch)
    model = torch.nn.Module()  # whose dropout masks have 1000 elements an epoch
    monkeypatch.setattr(fit_trainer, "mask_elements", lambda network: 1000)
    assert not uses_cpu_kernels(TrainConfig.of("s", epochs=PAYING // 1000 - 1), model)
    assert uses_cpu_kernels(TrainConfig.of("s", epochs=PAYING // 1000 + 1), model)
    assert uses_cpu_kernels(TrainConfig.of("s", epochs=1, batch_size=64), model)
    monkeypatch.setattr(fit_trainer, "has_norm", lambda network: network is model)
    assert uses_cpu_kernels(TrainConfig.of("s", epochs=1), model)


@pytest.mark.parametrize("dropout", [0.5, 0.0])
def test_mask_elements_are_the_feature_block_and_every_block_output(
    stores: StoreFactory, monkeypatch: pytest.MonkeyPatch, dropout: float
) -> None:
    """Three layers: masks on the features (with a rate) and on the two hidden outputs, 50 rows each; a
    trainer whose masks do not pay starts no numba and trains its epochs without the kernels."""
    store = stores("sbm:50:3", tiles=2)
    config = TrainConfig.of(store, epochs=2, hidden=16, dropout=dropout)
    want = 50 * ((open_store(store).num_features if dropout else 0) + 2 * 16)
    forget_numba(monkeypatch)  # after the store is sharded (numba's kernels)
    started = []
    monkeypatch.setattr(fit_trainer, "start_numba", lambda: started.append(True))
    trainer = Trainer(model_grid(config, single_rank_comm()), config)
    assert mask_elements(trainer.model) == want
    assert (trainer.cpu_kernels, started) == (False, [])
    longer = config.replace(epochs=PAYING // want + 1)
    trainer = Trainer(model_grid(longer, single_rank_comm()), longer)
    assert (trainer.cpu_kernels, started) == (True, [True])


IMPORTED_FIRST = """
import sys
import numba
from gtool.cli.main import program
sys.argv = ["gtool", *sys.argv[1:]]
program()
"""
"""`gtool` in a process that has imported numba: its run takes the kernels."""


@pytest.mark.integration
def test_a_short_small_run_imports_no_numba_and_trains_as_the_kernels_do(
    stores: StoreFactory, tmp_path
) -> None:
    store = stores("sbm:400:4", tiles=2)
    runs = {
        "spec": REPORTING_GTOOL,
        "kernels": [sys.executable, "-c", IMPORTED_FIRST],
    }
    logs = {}
    for name, program in runs.items():
        log = tmp_path / f"{name}.jsonl"
        args = ["train", store, "--epochs", "3", "-q", "--log", str(log)]
        done = subprocess.run([*program, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        logs[name] = [json.loads(line) for line in log.read_text().splitlines()]
        if name == "spec":
            modules = imported(done.stderr)
            assert "torch" in modules and "numba" not in modules
    figures = [[(r["loss"], r.get("accuracy")) for r in logs[name] if "loss" in r] for name in runs]
    assert figures[0] == figures[1] and len(figures[0]) == 3
