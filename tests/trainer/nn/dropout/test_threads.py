"""The CPU kernels' threads: one thread starts no numba thread pool, and more leave torch's count as it was
(numba's OpenMP pool launch sets OpenMP's thread count, which torch shares on this build)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PASSES = """
import numba, torch
from numba.np.ufunc import parallel
from gtool.trainer.nn.dropout import MaskSpec, kernels
spec, x = MaskSpec.of(1, 0, 0, 0.5, 16), torch.randn(64, 16)
torch.set_num_threads(1)
kernels.scale(x, spec, (0, 64, 0, 16))
print(torch.get_num_threads(), parallel._is_initialized)
torch.set_num_threads(2)
kernels.scale(x, spec, (0, 64, 0, 16))
print(torch.get_num_threads(), parallel._is_initialized)
"""


@pytest.mark.integration
def test_one_thread_starts_no_pool_and_more_keep_torchs_count() -> None:
    """A fresh process (no pool yet), numba allowed 3 threads: at torch's 1 thread the serial compile runs
    and no pool starts; at 2 the pool starts (its launch set OpenMP's count to 3) and torch keeps 2."""
    environment = {**os.environ, "NUMBA_NUM_THREADS": "3"}
    done = subprocess.run(
        [sys.executable, "-c", PASSES], env=environment, capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[:2] == ["1 False", "2 True"]
