"""numba's start: the CPU kernels (dropout, the fused RMSNorm, mini-batch cuts) are numba's, and numba costs
about 0.3 s to start in a process (0.14 s to import it, 0.2 s for its compiler's registries, which import
scipy.linalg). The kernel modules import it when a kernel is first picked; a run that uses them starts it
before its timed epochs (`start_numba`), a local launch's supervisor once for every rank it forks. A short
run on a small graph whose only kernels would be dropout's takes their torch specification instead
(`kernels_pay`): the same decisions, bit for bit, slower per element, without numba's start."""

from __future__ import annotations

import sys

START_SECONDS = 0.3
"""numba's import and compiler start in a process, measured on this project's CPU machine."""
SPEC_SECONDS_PER_ELEMENT = 4e-9
"""What a dropout mask costs in the torch specification more than in numba's kernel, per element of its
block (measured on a 2000 x 128 float32 block: 1.2 ms against 0.16 ms)."""


def start_numba() -> None:
    """Start numba's compiler (slow once a process, then a no-op), so that no timed epoch pays for it. No
    kernel runs: threads do not survive a fork, and a supervisor's ranks start their own."""
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


def kernels_pay(mask_elements: int) -> bool:
    """Whether dropout masks covering `mask_elements` elements over a run are faster from numba's kernels:
    numba is in this process already (a supervisor started it for its ranks), or the torch specification
    would cost more than numba's start."""
    return "numba" in sys.modules or mask_elements * SPEC_SECONDS_PER_ELEMENT > START_SECONDS
