"""Which implementation runs a block's dropout passes: numba's kernels on the CPU, Triton's on CUDA when
triton is installed, and otherwise (other devices or dtypes, CUDA without triton) none, in which case
`functions` applies the plain torch specification of `masks`."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import torch

from gtool.trainer.nn.dropout import kernels

FUSED_DTYPES = (torch.float32, torch.float64)
TRITON_KERNELS = "gtool.trainer.nn.dropout.triton_kernels"
TRITON_MISSING = (
    "note: triton is not installed, so CUDA dropout builds its masks from whole-block torch operations "
    "(slower, several GB more GPU memory); install triton (gtool's gpu extra) for the fused kernels"
)


@functools.cache
def optional_module(name: str) -> ModuleType | None:
    """The module `name`, or None when it cannot be imported (Triton kernels where triton is missing)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def triton_passes() -> ModuleType | None:
    """The Triton kernels, or None when triton cannot be imported."""
    return optional_module(TRITON_KERNELS)


def device_passes(tensor: torch.Tensor, cpu: ModuleType, triton_module: str) -> ModuleType | None:
    """`cpu` for a float32/float64 CPU tensor, the module `triton_module` for a CUDA one when it imports,
    else None."""
    if tensor.dtype not in FUSED_DTYPES:
        return None
    if tensor.device.type == "cpu":
        return cpu
    if tensor.device.type == "cuda":
        return optional_module(triton_module)
    return None


def passes_for(tensor: torch.Tensor) -> ModuleType | None:
    """The module whose `scale`, `relu_scale` and `scale_flagged` run on `tensor`, or None."""
    return device_passes(tensor, kernels, TRITON_KERNELS)


def cuda_notice() -> str | None:
    """The one line to print before CUDA training without triton (None when triton is there)."""
    return None if triton_passes() is not None else TRITON_MISSING
