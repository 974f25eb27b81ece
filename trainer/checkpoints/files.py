"""Sharded checkpoints: one file of plain tensors per rank, a JSON manifest, and JSON pointers to the latest
checkpoint and to the model of the best validation accuracy so far (docs/train.md, "Checkpoints").

    DIR/latest.json, DIR/epoch-00000E/{manifest.json, rank-0000R.pt}    the latest complete epoch E
    DIR/best.json, DIR/best-00000B/...                                  the best validation epoch's model

Files are written atomically and the pointers move only once every rank's file is in place, so a run
killed at any moment leaves the previous checkpoint usable.
"""

from __future__ import annotations

import pickle
import shutil
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from gtool.trainer.checkpoints.folder import (
    BEST,
    LATEST,
    MANIFEST,
    CheckpointError,
    best_dir,
    epoch_dir,
    latest_manifest,
    pointed_epoch,
    rank_file,
    refuse_other_shape,
    run_files,
    write_atomically,
    write_json,
)
from gtool.trainer.checkpoints.shared import broadcast_object, gather_objects
from gtool.trainer.checkpoints.validity import missing_rank_files
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.launch.failures import ranks_text
from gtool.trainer.launch.lineage import refuse_orphaned


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
        parts = {LATEST: (epoch, epoch_dir(epoch), {**state, "epoch": epoch})}
        if best is not None and best[0] != self.best_epoch:
            parts[BEST] = (best[0], best_dir(best[0]), {**best[1], "epoch": best[0]})
        for _, name, content in parts.values():
            (self.directory / name).mkdir(parents=True, exist_ok=True)
            if self.comm.replica == 0:
                path = rank_file(self.directory / name, self.comm.rank)
                write_atomically(path, lambda handle, content=content: torch.save(content, handle))
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
                write_json(self.directory / name / MANIFEST, manifest)
                write_json(self.directory / pointer, {"epoch": number, "path": name})
        kept = {epoch_dir(epoch)} | ({best_dir(self.best_epoch)} if self.best_epoch is not None else set())
        for old in run_files(self.directory):
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
                found = (self.latest(), pointed_epoch(self.directory, BEST), None)
            except CheckpointError as error:
                found = (None, None, str(error))
        manifest, self.best_epoch, refused = broadcast_object(everyone, found)
        if refused is not None:
            raise CheckpointError(refused)
        if manifest is None:
            return None
        epoch, folder = manifest["epoch"], self.directory / epoch_dir(manifest["epoch"])
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
