"""A user's model: `--model FILE.py:NAME`, a function of the grid that returns a stack of gtool's blocks."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gtool.errors import GtoolError
from gtool.trainer.models.grid import Grid, Layout


def split_spec(spec: str) -> tuple[Path, str]:
    """FILE.py and NAME of `spec`."""
    path, _, name = spec.rpartition(":")
    return Path(path), name


def model_builder(spec: str) -> Callable[[Grid], Any]:
    """The function NAME of FILE.py (`spec`), imported; a missing file or name, or a file that fails to
    import, is a GtoolError naming it."""
    path, name = split_spec(spec)
    if not path.is_file():
        raise GtoolError(f"--model {spec}: no file {path}")
    module_name = f"gtool_user_model_{abs(hash(str(path.resolve())))}"
    module = sys.modules.get(module_name)
    if module is None:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # the user's code: whatever it raises is reported in one line
            raise GtoolError(
                f"--model {spec}: {path} fails to import ({type(exc).__name__}: {exc})"
            ) from None
        sys.modules[module_name] = module
    builder = getattr(module, name, None)
    if not callable(builder):
        raise GtoolError(f"--model {spec}: {path} has no function {name}")
    return builder


def user_model(spec: str, grid: Grid) -> torch.nn.Module:
    """The model `spec`'s function builds on `grid`: a torch module with an `output` Layout."""
    built = model_builder(spec)(grid)
    if not isinstance(built, torch.nn.Module):
        raise GtoolError(
            f"--model {spec}: returned an object of type {type(built).__name__!r}, not a torch.nn.Module"
        )
    if not isinstance(getattr(built, "output", None), Layout):
        raise GtoolError(
            f"--model {spec}: the module has no `output` Layout (set it to the last block's .output)"
        )
    return built
