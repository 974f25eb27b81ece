"""R-MAT blocks: the compiled bit setting gives exactly the edges of the plain numpy formula."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.preprocess.sources.generators import RMAT_A, RMAT_B, RMAT_C, rmat_block


def formula(scale: int, seed: int, block: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Bit by bit: the k-th uint16 draw of the block's generator picks edge e's quadrant at bit k."""
    rng = np.random.default_rng([seed, block])
    src, dst = np.zeros(count, dtype=np.int64), np.zeros(count, dtype=np.int64)
    a, ab, abc = (round(p * 65536) for p in (RMAT_A, RMAT_A + RMAT_B, RMAT_A + RMAT_B + RMAT_C))
    for bit in range(scale):
        u = rng.integers(0, 1 << 16, size=count, dtype=np.uint16)
        down = u >= ab
        src |= down.astype(np.int64) << bit
        dst |= ((u >= a) ^ down ^ (u >= abc)).astype(np.int64) << bit
    return src, dst


@pytest.mark.parametrize(("scale", "count"), [(1, 5), (8, 1000), (9, 777), (17, 4096), (40, 300), (12, 0)])
def test_blocks_are_the_formulas_edges(scale, count):
    src, dst = rmat_block(scale, 3, 2, count)
    want_src, want_dst = formula(scale, 3, 2, count)
    np.testing.assert_array_equal(src, want_src)
    np.testing.assert_array_equal(dst, want_dst)
    assert src.dtype == dst.dtype == np.int64


@pytest.mark.integration
def test_a_negative_seed_is_one_error_line(tmp_path: Path) -> None:
    """rmat:5:1:-1 reached numpy's generator and ended in a traceback."""
    out = tmp_path / "r.zarr"
    result = CliRunner().invoke(app, ["shard", "rmat:5:1:-1", "-o", str(out), "-q", "-w", "1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert (
        result.output == "error: rmat: expected 1 <= SCALE <= 40, EDGEFACTOR >= 1 and SEED >= 0, got 5:1:-1\n"
    )
    assert list(tmp_path.iterdir()) == []
