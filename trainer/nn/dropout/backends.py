"""Which implementation runs a block's dropout passes: numba's kernels on the CPU, Triton's on CUDA when
triton is installed, and otherwise (other devices or dtypes, CUDA without triton) none, in which case
`functions` applies the plain torch specification of `masks`. Within `cpu_kernels(False)` CPU blocks take
the specification too: it decides the same bits, slower per element, but needs no numba, whose start a
short run on a small graph need not pay (gtool.trainer.launch.numba_start). The kernel modules are imported
when first picked, so a process that never picks them never imports numba."""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import torch

from gtool.collector import paused

CPU_KERNELS = "gtool.trainer.nn.dropout.kernels"
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


_kernels_on_cpu = True
"""Whether CPU blocks take numba's kernels (`cpu_kernels` sets it for a while)."""


@contextmanager
def cpu_kernels(enabled: bool) -> Iterator[None]:
    """Within: CPU blocks take numba's kernels (`enabled`) or the torch specification (the same bits)."""
    global _kernels_on_cpu
    before, _kernels_on_cpu = _kernels_on_cpu, enabled
    try:
        yield
    finally:
        _kernels_on_cpu = before


def cpu_module_loaded(name: str) -> ModuleType:
    """The CPU kernels' module `name`, imported the first time with collection paused: it starts numba,
    whose many objects a settled rank would otherwise walk (gtool.collector.paused)."""
    if (module := sys.modules.get(name)) is not None:
        return module
    with paused():
        return importlib.import_module(name)


def device_passes(tensor: torch.Tensor, cpu_module: str, triton_module: str) -> ModuleType | None:
    """The module `cpu_module` for a float32/float64 CPU tensor, the module `triton_module` for a CUDA one
    when it imports, else None."""
    if tensor.dtype not in FUSED_DTYPES:
        return None
    if tensor.device.type == "cpu":
        return cpu_module_loaded(cpu_module)
    if tensor.device.type == "cuda":
        return optional_module(triton_module)
    return None


def passes_for(tensor: torch.Tensor, any_rows: bool = False) -> ModuleType | None:
    """The module whose `scale`, `relu_scale` and `scale_flagged` run on `tensor`, or None; with `any_rows`
    (a block whose rows are any global ids, a `RowsBlock`) only the CPU kernels, which take them."""
    if tensor.device.type == "cpu" and not _kernels_on_cpu:
        return None
    if any_rows and tensor.device.type != "cpu":
        return None
    return device_passes(tensor, CPU_KERNELS, TRITON_KERNELS)


def cuda_notice() -> str | None:
    """The one line to print before CUDA training without triton (None when triton is there)."""
    return None if triton_passes() is not None else TRITON_MISSING
