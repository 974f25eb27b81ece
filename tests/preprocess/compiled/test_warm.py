"""`warm` loads every kernel of the pipeline, so that a worker's first tasks load none."""

from __future__ import annotations

import importlib
import pkgutil

from numba.core.dispatcher import Dispatcher

from gtool.preprocess import compiled


def test_warm_loads_every_kernel_of_every_module():
    compiled.warm()
    modules = [
        importlib.import_module(f"{compiled.__name__}.{info.name}")
        for info in pkgutil.iter_modules(compiled.__path__)
    ]
    kernels = {
        f"{module.__name__}.{name}": value
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, Dispatcher) and value.__module__ == module.__name__
    }
    assert len(kernels) >= 5
    assert [name for name, kernel in kernels.items() if not kernel.overloads] == []
