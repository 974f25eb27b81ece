"""numba's start: the CPU kernels (dropout, the fused RMSNorm, mini-batch cuts) are numba's, and numba costs
about 0.35 s to start in a process (0.14 s to import it, 0.2 s for its compiler's registries, which import
scipy.linalg). The kernel modules import it when a kernel is first picked; a run that uses them starts it
before its timed epochs (`start_numba`), a local launch's supervisor once for every rank it forks. A short
run on a small graph whose only kernels would be dropout's takes their torch specification instead
(`kernels_pay`): the same decisions, bit for bit, slower per element, without numba's start."""

from __future__ import annotations

import sys

from gtool.collector import paused

START_SECONDS = 0.35
"""numba's import and compiler start in a process, and its first kernels' loading from the cache, measured
on this project's CPU machine (a 5-epoch run of sbm:2000:4 on 1x1x1 ends 0.35 s sooner without them)."""
SPEC_SECONDS_PER_ELEMENT = 10e-9
"""What dropout costs in the torch specification more than in numba's kernels, per element of a block's
mask and training epoch (the mask, and the backward pass's scaling): measured in whole epochs on 1x1x1,
7.4 ns on sbm:20000:4 and 10.3 ns on sbm:2000:4 (2 threads)."""


def start_numba() -> None:
    """Start numba's compiler (slow once a process, then a no-op), so that no timed epoch pays for it. No
    kernel runs: threads do not survive a fork, and a supervisor's ranks start their own."""
    with paused():  # a rank settled already: no collection while numba's objects are made
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()


def kernels_pay(mask_elements: int) -> bool:
    """Whether dropout masks covering `mask_elements` elements over a run are faster from numba's kernels:
    numba is in this process already (a supervisor started it for its ranks), or the torch specification
    would cost more than numba's start."""
    return "numba" in sys.modules or mask_elements * SPEC_SECONDS_PER_ELEMENT > START_SECONDS
