"""Every grid shape and permutation trains exactly like the serial GCN on the unpermuted graph.

All cases run in one spawned world of 8 ranks (store -> load_rank -> Trainer on each rank); each rank
compares its blocks with the serial model and the test checks the errors and the replicas.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gtool.geometry.grid import DEFAULT_PLACEMENT, PLACEMENTS
from gtool.trainer.config import TrainConfig
from gtool.trainer.launch.local import launch_local
from tests.support.stores import StoreFactory
from tests.trainer.cases import Case, run_case, run_world

GRAPH = "grid:7x11"  # N = 77: no band count of any grid below divides it
FEATURES, CLASSES, HIDDEN, TILES = 11, 5, 7, 3
GRIDS = [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (2, 2, 2), (3, 2, 1)]
PERMS = ["none", "single", "double"]
WORLD = 8
TOLERANCE = {"float64": 1e-5, "float32": 1e-4}

BASE = TrainConfig.of("", hidden=HIDDEN, dropout=0.0, lr=0.05, weight_decay=5e-3, dtype="float64")


def _name(grid: tuple[int, int, int], perm: str, variant: str = "") -> str:
    return "x".join(map(str, grid)) + f"-{perm}" + (f"-{variant}" if variant else "")


EXACT = {_name(grid, perm): (perm, {"grid": grid}, "unpermuted") for grid in GRIDS for perm in PERMS}
VARIANTS = {
    _name((2, 2, 2), "double", "4-layers"): ("double", {"grid": (2, 2, 2), "layers": 4}, "unpermuted"),
    _name((3, 2, 1), "double", "2-layers"): ("double", {"grid": (3, 2, 1), "layers": 2}, "unpermuted"),
    _name((2, 2, 2), "double", "agg-blocks"): ("double", {"grid": (2, 2, 2), "agg_blocks": 3}, "unpermuted"),
    _name((2, 2, 2), "single", "learnable"): (
        "single",
        {"grid": (2, 2, 2), "learnable_features": True},
        "unpermuted",
    ),
    _name((3, 2, 1), "double", "adamw-first-row"): (
        "double",
        {"grid": (3, 2, 1), "algorithm": "adamw", "weight_decay_first_only": True}
        | {"normalize_features": "row"},
        "unpermuted",
    ),
    _name((2, 2, 2), "none", "dropout"): ("none", {"grid": (2, 2, 2), "dropout": 0.5}, "unpermuted"),
    _name((1, 1, 1), "double", "dropout"): ("double", {"grid": (1, 1, 1), "dropout": 0.5}, "stored"),
    _name((2, 2, 2), "double", "dropout"): ("double", {"grid": (2, 2, 2), "dropout": 0.5}, "stored"),
    _name((3, 2, 1), "double", "dropout"): ("double", {"grid": (3, 2, 1), "dropout": 0.5}, "stored"),
    _name((2, 2, 2), "double", "dropout-f32"): (
        "double",
        {"grid": (2, 2, 2), "dropout": 0.5, "dtype": "float32"},
        "stored",
    ),
    _name((2, 2, 2), "double", "bf16"): (
        "double",
        {"grid": (2, 2, 2), "dropout": 0.5, "dtype": "float32", "comm_dtype": "bf16"},
        "stored",
    ),
}
ORDERED = {  # auto (the default) makes layers 0 and L-1 transform-first here (11 -> 7, 7 -> 5); these too
    _name((1, 1, 1), "double", "transform-first"): (
        "double",
        {"grid": (1, 1, 1), "layer_order": "transform-first", "dropout": 0.5},
        "stored",
    ),
    _name((2, 2, 2), "double", "transform-first"): (
        "double",
        {"grid": (2, 2, 2), "layer_order": "transform-first", "dropout": 0.5},
        "stored",
    ),
    _name((3, 2, 1), "double", "transform-first"): (
        "double",
        {"grid": (3, 2, 1), "layer_order": "transform-first", "layers": 4, "agg_blocks": 2},
        "unpermuted",
    ),
    _name((2, 2, 2), "double", "aggregate-first"): (
        "double",
        {"grid": (2, 2, 2), "layer_order": "aggregate-first", "dropout": 0.5},
        "stored",
    ),
}
PLACED = {  # 4 ranks, 2 per node, under every order of the axes over the ranks
    _name((2, 2, 1), "double", f"placed-{order}"): (
        "double",
        {"grid": (2, 2, 1), "dropout": 0.5, "gpus_per_node": 2, "placement": order},
        "stored",
    )
    for order in PLACEMENTS
}
SCALEGNN = {"model": "scalegnn", "layers": 3}
SWITCHES = {
    "no-projection": {"input_projection": False},
    "no-norm": {"norm": "none"},
    "no-residual": {"residual": False},
    "no-bias": {"bias": False},
    "no-head": {"output_head": False},
}
STACKS = {  # the ScaleGNN stack: every component, each switched off, both orders, both permutations
    **{
        _name(grid, "double", "scalegnn"): ("double", {"grid": grid, **SCALEGNN}, "unpermuted")
        for grid in [(1, 1, 1), (2, 2, 2), (3, 2, 1)]
    },
    _name((2, 2, 2), "single", "scalegnn"): ("single", {"grid": (2, 2, 2), **SCALEGNN}, "unpermuted"),
    **{
        _name(grid, "double", f"scalegnn-{switch}"): (
            "double",
            {"grid": grid, **SCALEGNN, **off},
            "unpermuted",
        )
        for (switch, off), grid in zip(SWITCHES.items(), [(3, 2, 1), (2, 2, 2)] * 3, strict=False)
    },
    _name((3, 2, 1), "double", "scalegnn-transform-first"): (
        "double",
        {"grid": (3, 2, 1), **SCALEGNN, "layer_order": "transform-first", "agg_blocks": 2},
        "unpermuted",
    ),
    _name((2, 2, 2), "double", "scalegnn-learnable"): (
        "double",
        {"grid": (2, 2, 2), **SCALEGNN, "learnable_features": True, "algorithm": "adamw"},
        "unpermuted",
    ),
    **{
        _name(grid, "double", "scalegnn-dropout"): (
            "double",
            {"grid": grid, **SCALEGNN, "dropout": 0.5},
            "stored",
        )
        for grid in [(1, 1, 1), (2, 2, 2), (3, 2, 1)]
    },
    **{
        _name((2, 2, 2), "double", f"scalegnn-{variant}"): (
            "double",
            {"grid": (2, 2, 2), **SCALEGNN, "dropout": 0.5, "dtype": "float32", **changes},
            "stored",
        )
        for variant, changes in (("dropout-f32", {}), ("bf16", {"comm_dtype": "bf16"}))
    },
}
CASES = {**EXACT, **VARIANTS, **ORDERED, **PLACED, **STACKS}


@pytest.fixture(scope="module")
def results(stores: StoreFactory, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Write one store per permutation, run every case in one world, return the results directory."""
    shape = {"tiles": TILES, "seed": 5, "num_features": FEATURES, "num_classes": CLASSES}
    by_perm = {perm: stores(GRAPH, perm=perm, **shape) for perm in PERMS}
    cases = [
        Case(name, BASE.replace(store=by_perm[perm], **overrides), reference=reference)
        for name, (perm, overrides, reference) in CASES.items()
    ]
    out = tmp_path_factory.mktemp("results")
    launch_local(WORLD, run_world, cases, str(out), run_case)
    return out


def _rank_results(results: Path, name: str) -> list[dict]:
    files = sorted((results / name).glob("rank-*.pt"))
    grid = CASES[name][1]["grid"]
    assert len(files) == grid[0] * grid[1] * grid[2], f"{name}: not every rank reported"
    return [torch.load(f, weights_only=True) for f in files]


@pytest.mark.parametrize("name", [n for n in CASES if "comm_dtype" not in CASES[n][1]])
def test_matches_serial_model(results: Path, name: str) -> None:
    """Per-epoch losses, weight gradients and final logits equal the serial model's; padding stays zero
    (bf16 all-reduces round, so their run is compared with float32's losses instead)."""
    overrides = CASES[name][1]
    tolerance = TOLERANCE[overrides.get("dtype", "float64")]
    for rank, result in enumerate(_rank_results(results, name)):
        errors = result["errors"]
        for quantity in ("loss", "grad", "logits"):
            error = errors[quantity]
            assert error <= tolerance, f"{name} rank {rank}: {quantity} off by {error:.2e}"
        assert errors["padding"] == 0.0, f"{name} rank {rank}: padded rows of the logits are not zero"


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n][1].get("dropout")])
def test_dropout_replicas_identical(results: Path, name: str) -> None:
    """Blocks that several ranks hold (weights, logits, the loss) are bitwise identical after dropout runs."""
    seen: dict[str, torch.Tensor] = {}
    for rank, result in enumerate(_rank_results(results, name)):
        for key, block in result["replicas"].items():
            first = seen.setdefault(key, block)
            assert torch.equal(first, block), f"{name}: rank {rank} holds a different {key}"


def test_dropout_losses_are_the_same_on_every_grid(results: Path) -> None:
    """With dropout 0.5, every epoch's loss on 2x2x2 and 3x2x1 is 1x1x1's (the masks do not depend on
    the grid, nor on the order of each layer's products), within 1e-5 relative."""
    want = torch.tensor(_rank_results(results, "1x1x1-double-dropout")[0]["losses"], dtype=torch.float64)
    for name in (
        "2x2x2-double-dropout",
        "3x2x1-double-dropout",
        "1x1x1-double-transform-first",
        "2x2x2-double-transform-first",
        "2x2x2-double-aggregate-first",
    ):
        for rank, result in enumerate(_rank_results(results, name)):
            got = torch.tensor(result["losses"], dtype=torch.float64)
            error = float(((got - want).abs() / want.abs()).max())
            assert error <= 1e-5, f"{name} rank {rank}: losses off by {error:.2e} from 1x1x1's"


def test_scalegnn_dropout_losses_are_the_same_on_every_grid(results: Path) -> None:
    """The ScaleGNN stack with dropout 0.5 (masks on the features, every block's output; residual
    reshards across node orders) loses on 2x2x2 and 3x2x1 what it loses on 1x1x1, every epoch."""
    want = torch.tensor(_rank_results(results, "1x1x1-double-scalegnn-dropout")[0]["losses"])
    for name in ("2x2x2-double-scalegnn-dropout", "3x2x1-double-scalegnn-dropout"):
        for rank, result in enumerate(_rank_results(results, name)):
            got = torch.tensor(result["losses"], dtype=torch.float64)
            error = float(((got - want).abs() / want.abs()).max())
            assert error <= 1e-5, f"{name} rank {rank}: losses off by {error:.2e} from 1x1x1's"


@pytest.mark.parametrize("model", ["", "scalegnn-"])
def test_bf16_all_reduces_keep_the_float32_losses(results: Path, model: str) -> None:
    """--comm-dtype bf16 (H, Q, dH and dF all-reduced in bfloat16; RMSNorm's row sums and the loss stay
    float32) loses what float32 loses, every epoch, within 1e-2 relative."""
    reference = _rank_results(results, f"2x2x2-double-{model}dropout-f32")[0]["losses"]
    want = torch.tensor(reference, dtype=torch.float64)
    for rank, result in enumerate(_rank_results(results, f"2x2x2-double-{model}bf16")):
        got = torch.tensor(result["losses"], dtype=torch.float64)
        error = float(((got - want).abs() / want.abs()).max())
        assert error <= 1e-2, f"rank {rank}: losses off by {error:.2e} from float32's"


def test_every_placement_trains_to_the_same_losses(results: Path) -> None:
    """2x2x1 on 4 ranks, 2 per node, under each of the 6 placements (which rank holds which coordinates):
    every rank logs the same losses, bit for bit, as under gtool's default order."""
    want = _rank_results(results, _name((2, 2, 1), "double", f"placed-{DEFAULT_PLACEMENT}"))[0]["losses"]
    for name in PLACED:
        for rank, result in enumerate(_rank_results(results, name)):
            assert result["losses"] == want, f"{name} rank {rank}"
