"""`warm` loads every numba kernel of the pipeline, so that a worker's first tasks load none."""

from __future__ import annotations

import importlib

from numba.core.dispatcher import Dispatcher

from gtool.preprocess import kernels


def test_warm_loads_every_kernel_of_every_module():
    kernels.warm()
    modules = [importlib.import_module(f"{kernels.__name__}.compiled.{name}") for name in kernels.KERNELS]
    compiled = {
        f"{module.__name__}.{name}": value
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, Dispatcher) and value.__module__ == module.__name__
    }
    assert len(compiled) >= 8
    assert [name for name, kernel in compiled.items() if not kernel.overloads] == []
