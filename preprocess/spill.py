"""The spill directory: intermediate shuffle files on local (or shared) disk, plain .npy only."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from gtool.npyio import load_npy


class SpillDir:
    """Paths of every intermediate file of one run, removed when the run ends.

    The folder is named after the output (`.NAME.spill-HASH`, HASH of the output's full location), so
    runs for different outputs never share one, and a run killed before it could clean up leaves a
    folder that the next run for the same output removes.
    """

    def __init__(self, root: str | None, near: Path, target: str):
        parent = Path(root) if root else near.parent
        parent.mkdir(parents=True, exist_ok=True)
        tag = hashlib.sha1(target.encode()).hexdigest()[:10]
        self.path = parent / f".{near.name}.spill-{tag}"
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir()

    def file(self, *parts: str) -> str:
        """Path of a spill file, creating its folder."""
        path = self.path.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return str(path)

    def save(self, array: np.ndarray, *parts: str) -> str:
        """Write an array as .npy (no pickles), returning its path."""
        path = self.file(*parts)
        save_to(array, path)
        return path

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def save_to(array: np.ndarray, path: str) -> None:
    """Write an array as .npy at an explicit path inside a spill directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array, allow_pickle=False)


def load(path: str, mmap: bool = True) -> np.ndarray:
    """Read a spill array, memory-mapped by default."""
    return load_npy(path, mmap)


def remove(path: str) -> None:
    """Delete a spill file that is no longer needed."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
