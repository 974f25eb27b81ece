"""Triton kernel modules imported afresh, for Triton's interpreter or for its compiler."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

_MISSING = object()


@contextlib.contextmanager
def fresh_modules(names: list[str], interpret: bool) -> Iterator[list[ModuleType]]:
    """The modules `names` imported anew in that order (a module that imports kernels of another comes
    after it), their kernels for Triton's interpreter (TRITON_INTERPRET=1, read when they are defined) or
    for the compiler; sys.modules, the packages' attributes and the environment are restored afterwards."""
    packages = [importlib.import_module(name.rpartition(".")[0]) for name in names]
    saved_modules = [sys.modules.pop(name, None) for name in names]
    saved_attributes = [
        package.__dict__.get(name.rpartition(".")[2], _MISSING)
        for package, name in zip(packages, names, strict=True)
    ]
    saved_env = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield [importlib.import_module(name) for name in names]
    finally:
        for name, package, module, attribute in zip(
            names, packages, saved_modules, saved_attributes, strict=True
        ):
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module
            leaf = name.rpartition(".")[2]
            if attribute is _MISSING:
                package.__dict__.pop(leaf, None)
            else:
                setattr(package, leaf, attribute)
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env
