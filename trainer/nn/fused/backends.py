"""Which implementation runs a block's fused passes: numba's kernels on the CPU, Triton's on CUDA when
triton is installed, for float32 and float64 blocks whose scale (and residual) share their dtype; None
otherwise, in which case `functions` runs the plain torch specification of `reference`. Its summation
order differs from the kernels', so a CPU block always takes them (imported when first picked)."""

from __future__ import annotations

from types import ModuleType

import torch

from gtool.trainer.nn.dropout.backends import device_passes

CPU_KERNELS = "gtool.trainer.nn.fused.kernels"
TRITON_KERNELS = "gtool.trainer.nn.fused.triton_kernels"


def passes_for(z: torch.Tensor, gamma: torch.Tensor, residual: torch.Tensor | None) -> ModuleType | None:
    """The module whose `row_squares`, `forward`, `backward_sums` and `backward_input` run on z, or None."""
    others = [gamma] if residual is None else [gamma, residual]
    if any(t.dtype != z.dtype or t.device != z.device for t in others):
        return None
    return device_passes(z, CPU_KERNELS, TRITON_KERNELS)
