"""A checkpoint folder's files other than the ranks' tensors (docs/train.md, "Checkpoints"): the pointers,
the manifests, the run shape a checkpoint must agree on, and the folder claimed by a run. Nothing here
imports torch: the launcher checks the folder before any rank starts."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gtool.architecture import MODEL_COMPONENTS, ModelConfig
from gtool.errors import GtoolError
from gtool.geometry.grid import DEFAULT_PLACEMENT
from gtool.store.metadata import node_order_options, same_node_order
from gtool.store.reader import Store, open_store
from gtool.store.writing.staging import STORAGE_FAILURES
from gtool.trainer.checkpoints.validity import (
    RANK_FILE,
    RANK_NAME,
    missing_files_reason,
    missing_rank_files,
    shape_problem,
)
from gtool.trainer.config import TrainConfig
from gtool.units import human_bytes

LATEST = "latest.json"
BEST = "best.json"
POINTERS = (LATEST, BEST)
MANIFEST = "manifest.json"
TEMPORARY = ".tmp"
"""The ending of the files `write_atomically` writes before renaming them (".NAME.PID.tmp")."""


class CheckpointError(GtoolError):
    """A checkpoint that cannot be resumed from: missing pieces or written by a different run shape."""


def recorded_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """A manifest's run shape, with what checkpoints written before a part of it was recorded had: z
    innermost, every layer aggregate-first ("transform_first": each layer's order), and full-graph
    epochs on one replica (no batch size, data_parallel 1)."""
    before = {"placement": DEFAULT_PLACEMENT, "batch_size": None, "data_parallel": 1}
    return {**before, "transform_first": [False] * (len(shape["dims"]) - 1), **shape}


UNTOLD = ("node_order", "normalize_features", "num_features", "num_classes", "multi_label")
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


def write_atomically(path: Path, write: Any) -> None:
    """Call write(file) on a temporary file next to `path`, flush it to disk, rename it to `path`. A failed
    write removes the temporary file and is a CheckpointError naming `path`: the latest complete checkpoint
    is unchanged."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY}")
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
    except BaseException:  # a signal (Terminated, KeyboardInterrupt) while writing: no temporary file left
        temporary.unlink(missing_ok=True)
        raise


def write_json(path: Path, content: dict[str, Any]) -> None:
    write_atomically(path, lambda handle: handle.write(json.dumps(content, indent=1).encode()))


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


def epoch_dir(epoch: int) -> str:
    return f"epoch-{epoch:06d}"


def best_dir(epoch: int) -> str:
    return f"best-{epoch:06d}"


def rank_file(folder: str | Path, rank: int) -> Path:
    """Rank `rank`'s part of the checkpoint in `folder` (a manifest's "path")."""
    return Path(folder) / RANK_FILE.format(rank)


def _written_epoch(pointer: Path) -> str:
    """'epoch E' of a latest.json, or what is wrong with it (it is refused or replaced, not read)."""
    try:
        return f"epoch {json.loads(pointer.read_bytes())['epoch']}"
    except (OSError, ValueError, UnicodeDecodeError, TypeError, KeyError):
        return f"{LATEST} unreadable"


CHECKPOINT_FOLDER = re.compile(r"(epoch|best)-\d{6,}")
"""The names of checkpoints' folders (epoch_dir, best_dir): other folders there are the user's."""


def run_files(directory: Path) -> list[Path]:
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


ZARR_MARKS = ("zarr.json", ".zgroup", ".zarray")
"""Files that make a folder a Zarr group or array (a graph store, a prediction): never a checkpoint folder."""
WRITTEN_IN_CHECKPOINT = re.compile(
    rf"{RANK_NAME.pattern}|{re.escape(MANIFEST)}|\..+\.\d+{re.escape(TEMPORARY)}"
)
"""What gtool writes in a checkpoint's folder (RANK_FILE, the manifest, their temporary files)."""
LEFT_TEMPORARY = re.compile(rf"\.({'|'.join(map(re.escape, POINTERS))})\.\d+{re.escape(TEMPORARY)}")
"""A pointer's temporary file that a killed writer left."""


def _refuse_zarr(directory: Path) -> None:
    """A graph store or a prediction's output is refused as a checkpoint folder: the checkpoint would be
    written among its arrays, and removed with it by the next `--overwrite`."""
    if mark := next((name for name in ZARR_MARKS if (directory / name).exists()), None):
        raise CheckpointError(
            f"--checkpoint {directory}: a Zarr store or prediction output ({mark} there), not a checkpoint "
            "folder; name another folder"
        )


def _refuse_users_folders(directory: Path) -> None:
    """A folder named like a checkpoint's (epoch-000001) holding files gtool does not write is the user's:
    refused before anything is removed, since a run would write into it and remove it later."""
    for folder in run_files(directory):
        if folder.is_dir() and (
            others := sorted(p.name for p in folder.iterdir() if not WRITTEN_IN_CHECKPOINT.fullmatch(p.name))
        ):
            shown = ", ".join(others[:3]) + (" ..." if len(others) > 3 else "")
            raise CheckpointError(
                f"--checkpoint {directory}: {folder.name} holds files gtool does not write ({shown}), and "
                "a run replaces folders of that name; move it away or name another folder"
            )


def refuse_missing_best(directory: Path) -> None:
    """--resume with a best.json that names a copy no longer usable (removed, damaged) is refused: the run
    would go on naming that epoch as the best model's, and `gtool predict` could not read it."""
    if not (directory / BEST).exists():
        return
    try:
        latest_manifest(directory, pointer=BEST)
    except CheckpointError as error:
        raise CheckpointError(
            f"--resume: {error}; remove {directory / BEST} to resume without the best model's copy (the "
            "next best epoch writes one)"
        ) from None


def claim_folder(directory: Path, resume: bool, overwrite: bool) -> None:
    """Make `directory` (made, and locked by the caller) this run's, before any rank starts: a checkpoint
    of another run there is refused unless `resume` (continue it) or `overwrite` (removed now); folders
    of checkpoints that were never completed (a killed run's) are removed, so that no rank writes into one,
    and so are pointers' temporary files a killed run left. A Zarr store, folders of checkpoints' names
    holding the user's files and, with `resume`, a best.json naming a lost copy are refused first."""
    _refuse_zarr(directory)
    _refuse_users_folders(directory)
    if (directory / LATEST).exists() and not resume:
        if not overwrite:
            raise CheckpointError(
                f"--checkpoint {directory} holds the checkpoint of another run "
                f"({_written_epoch(directory / LATEST)}); pass --resume to continue it, --overwrite to "
                "replace it, or name another folder"
            )
        for path in run_files(directory):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    if resume:
        refuse_missing_best(directory)
    kept = _referenced(directory)
    for folder in run_files(directory):
        if folder.is_dir() and folder.name not in kept:
            shutil.rmtree(folder)
    for left in directory.iterdir():
        if LEFT_TEMPORARY.fullmatch(left.name):
            left.unlink()


def checked_manifest(where: Path, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The manifest of the checkpoint in folder `where` (its folder as "path"), checked before any rank
    uses it: values of the right kinds and ranges (`required` shape keys present), and a rank file for every
    rank of its grid. Anything else is a CheckpointError naming the manifest."""
    if not where.is_dir():
        raise CheckpointError(f"{where}: the checkpoint's folder is missing (removed?)")
    if not (where / MANIFEST).exists():
        raise CheckpointError(f"{where}: {MANIFEST} is missing (the checkpoint was damaged)")
    manifest = _read_record(where / MANIFEST, "shape", dict)
    manifest["path"] = str(where)
    if problem := shape_problem(manifest, required):
        raise CheckpointError(f"{where / MANIFEST}: {problem}; the checkpoint is damaged or incomplete")
    if problem := missing_rank_files(manifest):
        raise CheckpointError(f"{where / MANIFEST}: {problem}; {missing_files_reason(manifest)}")
    return manifest


def latest_manifest(
    directory: Path, required: tuple[str, ...] = (), pointer: str = LATEST
) -> dict[str, Any] | None:
    """The checked manifest of the latest complete checkpoint in `directory` (its folder as "path"), or
    of the best model's copy (`pointer` BEST); None when there is none."""
    if not (directory / pointer).exists():
        return None
    return checked_manifest(directory / _read_record(directory / pointer, "path", str)["path"], required)


def pointed_epoch(directory: Path, pointer: str) -> int | None:
    """The epoch a pointer names, None when there is none."""
    if not (directory / pointer).exists():
        return None
    return int(_read_record(directory / pointer, "epoch", int)["epoch"])


def store_shape(store: Store) -> dict[str, Any]:
    """What a model's input and output widths must match in a store: its features, and its classes (or
    tasks, multi-label). A model with an input projection or an output head keeps them out of its dims."""
    return {
        "num_features": store.num_features,
        "num_classes": store.num_classes,
        "multi_label": store.meta.labels.multi_label,
    }


def _store_text(shape: dict[str, Any]) -> str:
    """'32 features and 6 classes' (or '5 tasks, multi-label') of a store_shape."""
    outputs = "tasks, multi-label" if shape["multi_label"] else "classes"
    return f"{shape['num_features']} features and {shape['num_classes']} {outputs}"


def refuse_other_store(manifest: dict[str, Any], location: str, store: Store) -> None:
    """A CheckpointError when the checkpoint `manifest` describes was trained on a store of other features,
    classes or kind of labels than `store` (at `location`): its model's input or output would not be the
    store's (a checkpoint written before they were recorded is not compared)."""
    written, current = recorded_shape(manifest["shape"]), store_shape(store)
    if all(key in written for key in current) and any(written[k] != v for k, v in current.items()):
        raise CheckpointError(
            f"{manifest['path']} was trained on a store of {_store_text(written)}; {location} has "
            f"{_store_text(current)}: the model's widths do not fit it"
        )


def run_shape(config: TrainConfig) -> dict:
    """The part of checkpoint_shape that the options and the store's metadata give (checked before any rank
    starts): the store's widths (store_shape). Learned features are saved by position: with them, the
    store's node order too."""
    store = open_store(config.store)
    shape = {
        "grid": list(config.grid),
        "placement": config.process_grid.placement,
        "dtype": config.model.dtype,
        "optimizer": config.optimizer.algorithm,
        "components": asdict(config.model.components),
        "learnable_features": config.model.learnable_features,
        "normalize_features": config.model.normalize_features,
        "batch_size": config.minibatch.batch_size,
        "data_parallel": config.minibatch.data_parallel,
        **store_shape(store),
    }
    if config.model.learnable_features:
        shape["node_order"] = store.node_order
    return shape
