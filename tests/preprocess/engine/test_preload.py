"""The modules a worker imports before its first task exist, and name every compiled kernel module."""

from __future__ import annotations

import importlib

from gtool.preprocess.engine.preload import KERNEL_MODULES, TASK_MODULES
from gtool.preprocess.kernels import KERNELS


def test_the_kernel_modules_are_the_compiled_packages_own() -> None:
    assert tuple(f"gtool.preprocess.kernels.compiled.{name}" for name in KERNELS) == KERNEL_MODULES


def test_every_preloaded_module_imports() -> None:
    for name in (*TASK_MODULES, *KERNEL_MODULES):
        assert importlib.import_module(name).__name__ == name
