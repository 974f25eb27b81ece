"""Mini-batch training trains like the serial model on the unpermuted graph: the same per-step losses on
every grid, replicas averaging their gradients like a serial update from the mean of their gradients,
and a resumed run like an uninterrupted one.

All runs share one spawned world of 6 ranks (store -> load_rank -> Trainer on each rank); runs that read
each step's feature rows from the store train and score as their in-memory twins.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.local import launch_local
from tests.support.stores import StoreFactory
from tests.trainer.cases import run_world
from tests.trainer.minibatch_cases import MiniBatchCase, run_case, serial_losses

GRAPH = "grid:7x11"  # N = 77: no band count of the grids divides it, nor does B
SHAPE = {"tiles": 3, "seed": 5, "num_features": 11, "num_classes": 5, "perm": "double"}
WORLD, EPOCHS = 6, 3
BASE = TrainConfig.of(
    "",
    hidden=7,
    dropout=0.5,
    lr=0.05,
    weight_decay=5e-3,
    dtype="float64",
    batch_size=20,
    evaluation="sampled",
)
CASES = {
    "1x1x1": ({"grid": (1, 1, 1)}, None),
    "2x2x1": ({"grid": (2, 2, 1)}, None),
    "3x2x1": ({"grid": (3, 2, 1)}, None),  # auto: layers 0 and 2 transform-first (11 -> 7, 7 -> 5)
    "3x2x1-transform-first": ({"grid": (3, 2, 1), "layer_order": "transform-first"}, None),
    "2x2x1-aggregate-first": ({"grid": (2, 2, 1), "layer_order": "aggregate-first"}, None),
    "2x(2x1x1)": ({"grid": (2, 1, 1), "data_parallel": 2, "batch_size": 30}, None),  # a short last round
    "2x(2x1x1)-resumed": ({"grid": (2, 1, 1), "data_parallel": 2, "batch_size": 30}, 2),
}
SCALEGNN = {"model": "scalegnn"}
STACKS = {  # the ScaleGNN stack: residuals move each step's members across layouts and node orders
    "scalegnn-1x1x1": ({"grid": (1, 1, 1), **SCALEGNN}, None),
    "scalegnn-2x2x1": ({"grid": (2, 2, 1), **SCALEGNN}, None),
    "scalegnn-3x2x1": ({"grid": (3, 2, 1), **SCALEGNN}, None),
    "scalegnn-3x2x1-transform-first": (
        {"grid": (3, 2, 1), **SCALEGNN, "layer_order": "transform-first"},
        None,
    ),
    "scalegnn-2x(2x1x1)": ({"grid": (2, 1, 1), **SCALEGNN, "data_parallel": 2, "batch_size": 30}, None),
    "scalegnn-2x(2x1x1)-resumed": ({"grid": (2, 1, 1), **SCALEGNN, "data_parallel": 2, "batch_size": 30}, 2),
    "scalegnn-2x1x1-no-norm-no-head": (
        {"grid": (2, 1, 1), **SCALEGNN, "norm": "none", "output_head": False},
        None,
    ),
}
CASES.update(STACKS)
ROW = {"normalize_features": "row"}
CASES["2x2x1-row"] = ({"grid": (2, 2, 1), **ROW}, None)
STREAMED = {  # each step's feature rows read from the store: the same run as its in-memory twin
    f"{name}-store": ({**CASES[name][0], "features_from": "store"}, CASES[name][1])
    for name in ("1x1x1", "3x2x1", "2x(2x1x1)", "scalegnn-2x1x1-no-norm-no-head", "2x2x1-row")
}
CASES.update(STREAMED)


@pytest.fixture(scope="module")
def results(stores: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    store = stores(GRAPH, **SHAPE)
    configs = {name: BASE.replace(store=store, **overrides) for name, (overrides, _) in CASES.items()}
    cases = [MiniBatchCase(name, configs[name], EPOCHS, CASES[name][1]) for name in CASES]
    out = tmp_path_factory.mktemp("minibatch")
    launch_local(WORLD, run_world, cases, str(out), run_case)
    return out, configs


def _saved(results: tuple[Path, dict], name: str) -> dict:
    return torch.load(results[0] / f"{name}.pt", weights_only=True)


def _losses(results: tuple[Path, dict], name: str) -> list:
    return _saved(results, name)["losses"]


def _assert_close(got: list, want: list, rel_tol: float = 1e-5) -> None:
    for got_epoch, want_epoch in zip(got, want, strict=True):
        for got_replica, want_replica in zip(got_epoch, want_epoch, strict=True):
            for g, w in zip(got_replica, want_replica, strict=True):
                assert (g is None) == (w is None), (got, want)
                if w is not None:
                    assert math.isclose(g, w, rel_tol=rel_tol, abs_tol=1e-9), (got, want)


@pytest.mark.parametrize(
    "name", ["1x1x1", "2x2x1", "3x2x1", "3x2x1-transform-first", "2x2x1-aggregate-first"]
)
def test_every_grid_has_the_per_step_losses_of_the_serial_model(results: tuple, name: str) -> None:
    _assert_close(_losses(results, name), serial_losses(results[1][name], EPOCHS))


@pytest.mark.parametrize("name", [name for name in STACKS if not name.endswith("resumed")])
def test_the_scalegnn_stack_has_the_per_step_losses_of_the_serial_model(results: tuple, name: str) -> None:
    _assert_close(_losses(results, name), serial_losses(results[1][name], EPOCHS))


def test_two_replicas_step_like_a_serial_update_from_their_mean_gradient(results: tuple) -> None:
    losses = _losses(results, "2x(2x1x1)")
    assert [len(rounds) for rounds in losses[0]] == [2, 2] and losses[0][1][1] is None  # 3 steps, 2 rounds
    _assert_close(losses, serial_losses(results[1]["2x(2x1x1)"], EPOCHS))


@pytest.mark.parametrize("name", ["2x(2x1x1)", "scalegnn-2x(2x1x1)"])
def test_a_resumed_run_has_the_losses_of_the_uninterrupted_one(results: tuple, name: str) -> None:
    assert _losses(results, f"{name}-resumed") == _losses(results, name)


@pytest.mark.parametrize("name", list(STREAMED))
def test_features_from_the_store_train_and_score_like_features_in_memory(results: tuple, name: str) -> None:
    memory = name.removesuffix("-store")
    _assert_close(_losses(results, name), _losses(results, memory), rel_tol=1e-6)
    assert _saved(results, name)["scores"] == _saved(results, memory)["scores"]  # sampled evaluations


def test_row_normalized_features_train_like_the_serial_model(results: tuple) -> None:
    _assert_close(_losses(results, "2x2x1-row"), serial_losses(results[1]["2x2x1-row"], EPOCHS))
