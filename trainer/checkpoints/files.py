"""Sharded checkpoints: one file of plain tensors per rank, a JSON manifest, and JSON pointers to the latest
checkpoint and to the model of the best validation accuracy so far (docs/train.md, "Checkpoints").

    DIR/latest.json, DIR/epoch-00000E/{manifest.json, rank-0000R.pt}    the latest complete epoch E
    DIR/best.json, DIR/best-00000B/...                                  the best validation epoch's model

Files are written atomically and the pointers move only once every rank's file is in place, so a run
killed at any moment leaves the previous checkpoint usable.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import socket
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from gtool.architecture import MODEL_COMPONENTS, ModelConfig
from gtool.errors import GtoolError
from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.store.metadata import node_order_options, same_node_order
from gtool.store.writing.staging import STORAGE_FAILURES
from gtool.trainer.checkpoints.shared import broadcast_object, gather_objects, ranks_text
from gtool.trainer.checkpoints.validity import RANK_FILE, missing_rank_files, shape_problem
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.launch.lineage import refuse_orphaned
from gtool.units import human_bytes

LATEST = "latest.json"
BEST = "best.json"
POINTERS = (LATEST, BEST)
MANIFEST = "manifest.json"


class CheckpointError(GtoolError):
    """A checkpoint that cannot be resumed from: missing pieces or written by a different run shape."""


def recorded_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """A manifest's run shape, with what checkpoints written before a part of it was recorded had: z
    innermost, every layer aggregate-first ("transform_first": each layer's order), and full-graph
    epochs on one replica (no batch size, data_parallel 1)."""
    before = {"placement": DEFAULT_PLACEMENT, "batch_size": None, "data_parallel": 1}
    return {**before, "transform_first": [False] * (len(shape["dims"]) - 1), **shape}


UNTOLD = ("node_order", "normalize_features")
"""Run shape keys that checkpoints written before them lack and that cannot be told then: not compared."""
FROM_MODEL = ("normalize_features",)
"""Run shape keys that checkpoints written before them have among their model options."""


def recorded_components(model: dict[str, Any] | None) -> dict[str, bool]:
    """The components of the model a manifest's options describe (a manifest without them: a GCN's)."""
    return asdict(ModelConfig(**model).components if model else MODEL_COMPONENTS["gcn"])


def refuse_other_shape(manifest: dict[str, Any], shape: dict[str, Any]) -> None:
    """A CheckpointError naming what differs when the checkpoint `manifest` was written by a run of
    another `shape` (any of its keys)."""
    model = manifest.get("model")
    written = {
        **{k: model[k] for k in FROM_MODEL if model and k in model},
        "components": recorded_components(model),
        **recorded_shape(manifest["shape"]),
    }
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
    the options of `gtool shard` that made it; components, those the model has)."""
    if key == "batch_size" and value is None:
        return "full graph"
    if key == "node_order" and isinstance(value, dict):
        return node_order_options(value)
    if key == "components" and isinstance(value, dict):
        return " + ".join(name for name, on in value.items() if on) or "GCN layers alone"
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


def _best_dir(epoch: int) -> str:
    return f"best-{epoch:06d}"


def rank_file(folder: str | Path, rank: int) -> Path:
    """Rank `rank`'s part of the checkpoint in `folder` (a manifest's "path")."""
    return Path(folder) / RANK_FILE.format(rank)


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


def _written_epoch(pointer: Path) -> str:
    """'epoch E' of a latest.json, or what is wrong with it (it is refused or replaced, not read)."""
    try:
        return f"epoch {json.loads(pointer.read_bytes())['epoch']}"
    except (OSError, ValueError, UnicodeDecodeError, TypeError, KeyError):
        return f"{LATEST} unreadable"


CHECKPOINT_FOLDER = re.compile(r"(epoch|best)-\d{6,}")
"""The names of checkpoints' folders (_epoch_dir, _best_dir): other folders there are the user's."""


def _run_files(directory: Path) -> list[Path]:
    """What runs write in a checkpoint folder: the pointers and the checkpoints' folders (no other folder:
    a `best-practices` beside them is not a run's)."""
    pointers = [directory / name for name in POINTERS]
    folders = [p for p in directory.iterdir() if CHECKPOINT_FOLDER.fullmatch(p.name) and p.is_dir()]
    return [p for p in pointers if p.exists()] + folders


def _referenced(directory: Path) -> set[str]:
    """The checkpoint folders the pointers name (none of one that is unreadable: it is refused later)."""
    named = set()
    for name in POINTERS:
        with contextlib.suppress(OSError, ValueError, UnicodeDecodeError, TypeError, KeyError):
            named.add(str(json.loads((directory / name).read_bytes())["path"]))
    return named


def claim_folder(directory: Path, resume: bool, overwrite: bool) -> None:
    """Make `directory` (made, and locked by the caller) this run's, before any rank starts: a checkpoint
    of another run there is refused unless `resume` (continue it) or `overwrite` (removed now); folders
    of checkpoints that were never completed (a killed run's) are removed, so that no rank writes into one."""
    if (directory / LATEST).exists() and not resume:
        if not overwrite:
            raise CheckpointError(
                f"--checkpoint {directory} holds the checkpoint of another run "
                f"({_written_epoch(directory / LATEST)}); pass --resume to continue it, --overwrite to "
                "replace it, or name another folder"
            )
        for path in _run_files(directory):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    kept = _referenced(directory)
    for folder in _run_files(directory):
        if folder.is_dir() and folder.name not in kept:
            shutil.rmtree(folder)


def checked_manifest(where: Path, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The manifest of the checkpoint in folder `where` (its folder as "path"), checked before any rank
    uses it: values of the right kinds and ranges (`required` shape keys present), and a rank file for every
    rank of its grid. Anything else is a CheckpointError naming the manifest."""
    if not (where / MANIFEST).exists():
        raise CheckpointError(f"{where}: {MANIFEST} is missing (the checkpoint was damaged)")
    manifest = _read_record(where / MANIFEST, "shape", dict)
    manifest["path"] = str(where)
    problem = shape_problem(manifest, required) or missing_rank_files(manifest)
    if problem:
        raise CheckpointError(f"{where / MANIFEST}: {problem}; the checkpoint is damaged or incomplete")
    return manifest


def latest_manifest(
    directory: Path, required: tuple[str, ...] = (), pointer: str = LATEST
) -> dict[str, Any] | None:
    """The checked manifest of the latest complete checkpoint in `directory` (its folder as "path"), or
    of the best model's copy (`pointer` BEST); None when there is none."""
    if not (directory / pointer).exists():
        return None
    return checked_manifest(directory / _read_record(directory / pointer, "path", str)["path"], required)


def _pointed_epoch(directory: Path, pointer: str) -> int | None:
    """The epoch a pointer names, None when there is none."""
    if not (directory / pointer).exists():
        return None
    return int(_read_record(directory / pointer, "epoch", int)["epoch"])


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
        self.best_epoch: int | None = None
        """The epoch of the best model's copy in the folder (set on resuming, moved by `save`)."""

    def save(
        self,
        epoch: int,
        state: dict[str, Any],
        history: dict[str, Any],
        best: tuple[int, dict[str, Any]] | None = None,
    ) -> None:
        """Write this rank's `state` for `epoch` and, when `best` (an epoch and its model parts) is not the
        best copy written yet, that copy; rank 0 commits them once every rank has written.

        With replicas (--data-parallel), which hold the same parts and optimizer state, the first one
        writes them and every replica reads them back."""
        parts = {LATEST: (epoch, _epoch_dir(epoch), {**state, "epoch": epoch})}
        if best is not None and best[0] != self.best_epoch:
            parts[BEST] = (best[0], _best_dir(best[0]), {"model": best[1], "epoch": best[0]})
        for _, name, content in parts.values():
            (self.directory / name).mkdir(parents=True, exist_ok=True)
            if self.comm.replica == 0:
                path = rank_file(self.directory / name, self.comm.rank)
                _write_atomically(path, lambda handle, content=content: torch.save(content, handle))
        everyone = self.comm.everyone
        everyone.barrier()
        missing = self._missing(name for _, name, _ in parts.values()) if everyone.index == 0 else None
        if missing := broadcast_object(everyone, missing):
            raise CheckpointError(
                f"{missing} as rank 0 sees the folder, though every rank wrote its file: the ranks do not "
                "write to one folder (a folder on each node?); the latest complete checkpoint is unchanged"
            )
        if best is not None and BEST in parts:
            self.best_epoch = best[0]
        if everyone.index != 0:
            return
        refuse_orphaned(f"the checkpoint of epoch {epoch} in {self.directory}")
        for pointer in (BEST, LATEST):  # the best copy first: a checkpoint's history names its epoch
            if pointer in parts:
                number, name, _ = parts[pointer]
                manifest = {"epoch": number, "shape": self.shape, "history": history, "model": self.model}
                _write_json(self.directory / name / MANIFEST, manifest)
                _write_json(self.directory / pointer, {"epoch": number, "path": name})
        kept = {_epoch_dir(epoch)} | ({_best_dir(self.best_epoch)} if self.best_epoch is not None else set())
        for old in _run_files(self.directory):
            if old.is_dir() and old.name not in kept:
                shutil.rmtree(old, ignore_errors=True)

    def _missing(self, names: Iterable[str]) -> str | None:
        """'FOLDER: what is missing' of the first of the checkpoint folders `names` that lacks a rank file."""
        for name in names:
            if problem := missing_rank_files({"shape": self.shape, "path": str(self.directory / name)}):
                return f"{self.directory / name}: {problem}"
        return None

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

    def resume_point(self, device: torch.device) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The latest checkpoint's manifest as rank 0 reads it and this rank's state of that epoch, which
        every rank reads from its own file in that epoch's folder (None when there is no checkpoint yet).

        Every rank must call it. A rank whose file of that epoch is missing, unreadable or of another epoch
        fails every rank with one error naming the ranks: they would not resume from one checkpoint."""
        everyone = self.comm.everyone
        found: tuple[dict[str, Any] | None, int | None, str | None] = (None, None, None)
        if everyone.index == 0:
            try:
                found = (self.latest(), _pointed_epoch(self.directory, BEST), None)
            except CheckpointError as error:
                found = (None, None, str(error))
        manifest, self.best_epoch, refused = broadcast_object(everyone, found)
        if refused is not None:
            raise CheckpointError(refused)
        if manifest is None:
            return None
        epoch, folder = manifest["epoch"], self.directory / _epoch_dir(manifest["epoch"])
        state: dict[str, Any] = {}
        problem = None
        try:
            state = read_rank_file(folder, self.comm.rank, device)
            if state.get("epoch", epoch) != epoch:
                problem = f"{rank_file(folder, self.comm.rank)} is of epoch {state['epoch']}"
        except CheckpointError as unusable:
            problem = str(unusable)
        problems = gather_objects(everyone, (problem, socket.gethostname()))
        failed = [rank for rank, (text, _) in enumerate(problems) if text]
        if failed:
            raise CheckpointError(
                f"--resume: {ranks_text(failed, [host for _, host in problems])} cannot resume from "
                f"epoch {epoch}, which rank 0 read in {self.directory / LATEST} ({problems[failed[0]][0]}); "
                "the ranks do not share one checkpoint folder (a folder on each node?)"
            )
        return {**manifest, "path": str(folder)}, state
