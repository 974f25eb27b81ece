"""Stores written by the pipeline for tests: fresh ones (`make_store`), and the session's shared ones.

Building a store starts a Dask cluster, so every test that builds or reads one of these is an integration
test (tests/conftest.py marks the users of the `stores` fixture so).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from gtool.preprocess.options import ShardOptions
from gtool.preprocess.pipeline import shard


def make_store(source: str, path: Path, **options: Any) -> str:
    """Shard `source` into `path` with test-friendly defaults (one worker, no progress bars)."""
    options.setdefault("workers", 1)
    shard(source, str(path), ShardOptions(**options))
    return str(path)


class StoreFactory:
    """Stores shared by the whole test session: each distinct (source, options) is sharded once.

    Tests must not change a shared store; `private_copy` gives one to change."""

    def __init__(self, root: Path):
        self.root = root
        self.built: dict[tuple, str] = {}

    def __call__(self, source: str, **options: Any) -> str:
        key = (source, tuple(sorted(options.items())))
        if key not in self.built:
            name = f"{len(self.built)}-{source.replace(':', '_').replace('/', '_')[-40:]}.zarr"
            self.built[key] = make_store(source, self.root / name, **options)
        return self.built[key]

    def private_copy(self, source: str, destination: Path, **options: Any) -> str:
        """A copy of the shared store of (source, options) at `destination`, for a test to change."""
        shutil.copytree(self(source, **options), destination)
        return str(destination)


def all_arrays(path: str) -> dict[str, np.ndarray]:
    """Every array of a store by its path in the store, read whole."""
    group = zarr.open_group(path, mode="r")
    return {name: array[:] for name, array in group.members(max_depth=None) if isinstance(array, zarr.Array)}
