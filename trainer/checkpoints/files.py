"""Sharded checkpoints: one file of plain tensors per rank, a JSON manifest, a JSON pointer to the latest.

    DIR/latest.json                   {"epoch": E, "path": "epoch-0000E"}, replaced once E is complete
    DIR/epoch-0000E/manifest.json     what the run was (grid, widths, ..., its model options) and its history
    DIR/epoch-0000E/rank-0000R.pt     rank R's parameter parts and optimizer state (tensors only)

Files are written atomically and latest.json moves only once every rank's file is in place, so a run
killed at any moment leaves the previous checkpoint usable.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch

from gtool.errors import GtoolError
from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.store.metadata import node_order_options, same_node_order
from gtool.store.writing.staging import STORAGE_FAILURES
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.launch.lineage import refuse_orphaned
from gtool.units import human_bytes

LATEST = "latest.json"
MANIFEST = "manifest.json"


class CheckpointError(GtoolError):
    """A checkpoint that cannot be resumed from: missing pieces or written by a different run shape."""


def recorded_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """A manifest's run shape, with what checkpoints written before a part of it was recorded had: z
    innermost, every layer aggregate-first ("transform_first": each layer's order), and full-graph
    epochs on one replica (no batch size, data_parallel 1)."""
    before = {"placement": DEFAULT_PLACEMENT, "batch_size": None, "data_parallel": 1}
    return {**before, "transform_first": [False] * (len(shape["dims"]) - 1), **shape}


UNTOLD = ("node_order",)
"""Run shape keys that checkpoints written before them lack and that cannot be told then: not compared."""


def refuse_other_shape(manifest: dict[str, Any], shape: dict[str, Any]) -> None:
    """A CheckpointError naming what differs when the checkpoint `manifest` was written by a run of
    another `shape` (any of its keys)."""
    written = recorded_shape(manifest["shape"])
    differ = [
        k for k, v in shape.items() if not _same(k, written.get(k), v) and (k in written or k not in UNTOLD)
    ]
    if differ:
        details = ", ".join(
            f"{key}: checkpoint {_shown(key, written.get(key))} vs run {_shown(key, shape[key])}"
            for key in differ
        )
        raise CheckpointError(f"{manifest['path']} was written by a differently shaped run ({details})")


def _same(key: str, written: Any, current: Any) -> bool:
    """Whether a run shape's value is the checkpoint's (node orders: the same positions of every node)."""
    if key == "node_order" and isinstance(written, dict) and isinstance(current, dict):
        return same_node_order(written, current)
    return bool(written == current)


def _shown(key: str, value: Any) -> Any:
    """A run shape's value as a mismatch names it (a full-graph run has no batch size; a node order is
    the options of `gtool shard` that made it)."""
    if key == "batch_size" and value is None:
        return "full graph"
    if key == "node_order" and isinstance(value, dict):
        return node_order_options(value)
    return value


def _write_atomically(path: Path, write: Any) -> None:
    """Call write(file) on a temporary file next to `path`, flush it to disk, rename it to `path`. A failed
    write removes the temporary file and is a CheckpointError naming `path`: the latest complete checkpoint
    is unchanged."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except (OSError, RuntimeError) as exc:  # torch.save reports a short write (a full device) as RuntimeError
        temporary.unlink(missing_ok=True)
        why = STORAGE_FAILURES.get(getattr(exc, "errno", None) or 0) or f"{type(exc).__name__}: {exc}"
        if isinstance(exc, RuntimeError):  # torch.save's short write
            why += f"; {human_bytes(shutil.disk_usage(path.parent).free)} free there"
        raise CheckpointError(
            f"{path}: cannot be written ({why}); the latest complete checkpoint is unchanged"
        ) from None


def _write_json(path: Path, content: dict[str, Any]) -> None:
    _write_atomically(path, lambda handle: handle.write(json.dumps(content, indent=1).encode()))


def _read_record(path: Path, key: str, kind: type) -> dict[str, Any]:
    """A JSON object of a checkpoint that must hold `key` of type `kind`; anything else (bad JSON, bad
    bytes, another shape) is a CheckpointError naming the file."""
    try:
        record = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); the checkpoint is damaged") from None
    if not isinstance(record, dict) or not isinstance(record.get(key), kind):
        raise CheckpointError(
            f"{path}: expected a JSON object with '{key}' ({kind.__name__}); the checkpoint is damaged"
        )
    return record


def _epoch_dir(epoch: int) -> str:
    return f"epoch-{epoch:06d}"


def rank_file(folder: str | Path, rank: int) -> Path:
    """Rank `rank`'s part of the checkpoint in `folder` (a manifest's "path")."""
    return Path(folder) / f"rank-{rank:05d}.pt"


def read_rank_file(folder: str | Path, rank: int, device: torch.device | str, mmap: bool = False) -> Any:
    """Rank `rank`'s part of the checkpoint in `folder`, as plain tensors; a missing or unreadable file
    (truncated, overwritten) is a CheckpointError naming it."""
    path = rank_file(folder, rank)
    if not path.exists():
        raise CheckpointError(f"{path} is missing: the checkpoint does not have rank {rank}'s part")
    try:
        return torch.load(path, map_location=device, weights_only=True, mmap=mmap)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError) as exc:
        reason = str(exc).split(". ")[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: cannot be read ({reason}); the checkpoint is damaged") from None


def latest_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of the latest complete checkpoint in `directory` (its folder as "path"), or None."""
    pointer = directory / LATEST
    if not pointer.exists():
        return None
    where = directory / _read_record(pointer, "path", str)["path"]
    if not (where / MANIFEST).exists():
        raise CheckpointError(f"{where}: {MANIFEST} is missing (the checkpoint was damaged)")
    manifest = _read_record(where / MANIFEST, "shape", dict)
    manifest["path"] = str(where)
    return manifest


class Checkpoints:
    """The checkpoints of one run in `directory`; `shape` must match for a checkpoint to be resumed.

    Manifests also keep the run's `model` options, from which `gtool predict` rebuilds the model.
    """

    def __init__(
        self, directory: str, comm: GridComm, shape: dict[str, Any], model: dict[str, Any] | None = None
    ):
        self.directory = Path(directory)
        self.comm = comm
        self.shape = shape
        self.model = model

    def save(self, epoch: int, state: dict[str, Any], history: dict[str, Any]) -> None:
        """Write this rank's `state` for `epoch`; rank 0 commits the checkpoint once every rank has.

        With replicas (--data-parallel), which hold the same parts and optimizer state, the first one
        writes them and every replica reads them back."""
        target = self.directory / _epoch_dir(epoch)
        target.mkdir(parents=True, exist_ok=True)
        if self.comm.replica == 0:
            _write_atomically(rank_file(target, self.comm.rank), lambda handle: torch.save(state, handle))
        self.comm.everyone.barrier()
        if self.comm.everyone.index != 0:
            return
        manifest = {"epoch": epoch, "shape": self.shape, "history": history, "model": self.model}
        refuse_orphaned(f"the checkpoint {target}")
        _write_json(target / MANIFEST, manifest)
        _write_json(self.directory / LATEST, {"epoch": epoch, "path": target.name})
        for old in self.directory.glob("epoch-*"):
            if old.is_dir() and old.name != target.name:
                shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> dict[str, Any] | None:
        """The manifest of the latest complete checkpoint, or None when there is none yet."""
        manifest = latest_manifest(self.directory)
        if manifest is None:
            return None
        refuse_other_shape(manifest, self.shape)
        return manifest

    def load(self, manifest: dict[str, Any], device: torch.device) -> dict[str, Any]:
        """This rank's state from the checkpoint `manifest` describes."""
        return read_rank_file(manifest["path"], self.comm.rank, device)
