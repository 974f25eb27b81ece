"""The fused pass with its columns split over 2 and 3 ranks (gloo) equals the one-rank pass on the whole
rows: the sums of squares and backward's row dots are summed over the column group, the dropout masks are
cut from one global mask, and each rank's gradient of its part of the scale is its part of the whole."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from gtool.geometry.bands import band_size
from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.local import launch_local
from gtool.trainer.nn.fused import rms_relu_dropout, rms_relu_dropout_reference
from tests.trainer.cases import joined_world
from tests.trainer.nn.fused.cases import CPU, TOLERANCE, Case, assert_close, run

pytestmark = pytest.mark.integration

WORLD = 3
WIDTH = 13
"""Real columns: 2 ranks hold 7 each (one padded), 3 ranks 5 each (two padded)."""
CASES = {
    "float64-dropout-residual": Case(70, 0, WIDTH, row0=40, residual=True),
    "float32-rows-no-dropout": Case(45, 0, WIDTH, row_ids=True, rate=0.0, dtype=torch.float32),
}
FUNCTIONS = {"fused": rms_relu_dropout, "reference": rms_relu_dropout_reference}


def _split(case: Case, ranks: int, rank: int) -> tuple[Case, slice]:
    """This rank's case (its band of the padded columns) and the band's columns of the whole."""
    size = band_size(WIDTH, ranks)
    return Case(**{**case.__dict__, "cols": size, "col0": rank * size}), slice(rank * size, (rank + 1) * size)


def _whole(case: Case, ranks: int) -> Case:
    return Case(**{**case.__dict__, "cols": ranks * band_size(WIDTH, ranks)})


def _band(tensor: torch.Tensor | None, columns: slice) -> torch.Tensor | None:
    return None if tensor is None or tensor.dim() == 0 else tensor[..., columns]


def run_ranks(env: RankEnv, out: str) -> None:
    """Each rank runs every case on its band of columns, for a column group of 2 (ranks 0, 1) and of 3."""
    with joined_world(env):
        groups = {2: dist.new_group([0, 1]), 3: dist.group.WORLD}
        for ranks, process_group in groups.items():
            if env.rank >= ranks:
                continue
            group = AxisGroup(ranks, env.rank, process_group, PhaseTimer(CPU), CPU)
            for name, case in CASES.items():
                mine, columns = _split(case, ranks, env.rank)
                whole = _whole(case, ranks).tensors()
                given = {key: _band(value, columns) for key, value in whole.items()}
                for function_name, function in FUNCTIONS.items():
                    result = run(function, mine, group, **given)
                    torch.save(result, Path(out) / f"{name}-{ranks}-{function_name}-rank{env.rank}.pt")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks")
    launch_local(WORLD, run_ranks, str(out))
    return out


@pytest.mark.parametrize("function", list(FUNCTIONS))
@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_split_columns_equal_the_whole_rows(results: Path, name: str, ranks: int, function: str) -> None:
    case = CASES[name]
    whole = run(rms_relu_dropout, _whole(case, ranks))
    for rank in range(ranks):
        got = torch.load(results / f"{name}-{ranks}-{function}-rank{rank}.pt", weights_only=True)
        _, columns = _split(case, ranks, rank)
        bands = {key: _band(value, columns) for key, value in whole.items()}
        want = {key: value for key, value in bands.items() if value is not None}
        assert_close({key: got[key] for key in want}, want, TOLERANCE[case.dtype])
