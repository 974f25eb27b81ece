"""Which implementation runs a block's dropout passes: numba's kernels on the CPU, Triton's on CUDA when
triton is installed, and otherwise (other devices or dtypes, CUDA without triton) none, in which case
`functions` applies the plain torch specification of `masks`."""

from __future__ import annotations

import functools
from types import ModuleType

import torch

from gtool.trainer.nn.dropout import kernels

FUSED_DTYPES = (torch.float32, torch.float64)
TRITON_MISSING = (
    "note: triton is not installed, so CUDA dropout builds its masks from whole-block torch operations "
    "(slower, several GB more GPU memory); install triton (gtool's gpu extra) for the fused kernels"
)


@functools.cache
def triton_passes() -> ModuleType | None:
    """The Triton kernels, or None when triton cannot be imported."""
    try:
        from gtool.trainer.nn.dropout import triton_kernels
    except ImportError:
        return None
    return triton_kernels


def passes_for(tensor: torch.Tensor) -> ModuleType | None:
    """The module whose `scale`, `relu_scale` and `scale_flagged` run on `tensor`, or None."""
    if tensor.dtype not in FUSED_DTYPES:
        return None
    if tensor.device.type == "cpu":
        return kernels
    if tensor.device.type == "cuda":
        return triton_passes()
    return None


def cuda_notice() -> str | None:
    """The one line to print before CUDA training without triton (None when triton is there)."""
    return None if triton_passes() is not None else TRITON_MISSING
