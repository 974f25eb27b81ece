"""`--grid auto`'s trial: a few epochs of each grid the model predicts close to the best, on the run's own
store, model and local ranks, timed once and cached per machine (gtool.plan.costmodel.auto chooses).

Ranks that share a machine's cores slow each other down in ways the microbenchmarks do not see: on the
README's demo store, 8 ranks on 2 cores, the grid the model ranks first measures 20% slower than the
fastest (docs/plan.md, --grid auto). The trial trains TRIAL_EPOCHS epochs of every grid in one launch of
the ranks, and an epoch's figure is the median over the steady epochs of the slowest rank's seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gtool.geometry.grid import ProcessGrid
from gtool.plan.calibration.epochs import timed_epochs_rank
from gtool.plan.calibration.machine import FOLDER, machine_key
from gtool.preprocess import cache_folder
from gtool.store.reader import open_store
from gtool.store.writing.staging import is_url
from gtool.trainer import TrainConfig, run_local

TRIAL_EPOCHS = 3
WARMUP = 1
"""Epochs each grid trains in the trial, and the first ones of them left out (loading, first touches)."""
TRIAL_SECONDS = 30.0
"""The model's pick stands where the trial's epochs would take longer than this, as predicted (twice the
model's seconds: it under-predicts shared cores about that much)."""


def trials_path() -> Path:
    """This machine's cached trials, by run."""
    return cache_folder(None, None).path / FOLDER / f"trials-{machine_key()}.json"


def trial_key(config: TrainConfig, grids: list[ProcessGrid]) -> str:
    """What a trial's figures hold for: the store (its path and when it was made), the model, the ranks'
    threads and devices, and the grids with their placements."""
    store = open_store(config.store)
    runtime = config.runtime
    parts = [
        config.store if is_url(config.store) else os.path.abspath(config.store),
        store.meta.created_at,
        repr(config.model),
        f"{runtime.threads} {runtime.backend} {runtime.device} {runtime.eval_every}",
        " ".join(f"{grid}/{grid.placement}" for grid in grids),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def time_grids(
    config: TrainConfig, grids: list[ProcessGrid], predicted: float, report: Callable[[str], None]
) -> dict[str, float] | None:
    """Seconds of an epoch of `config` on each of `grids` (by GXxGYxGZ), from this machine's cache or a
    trial run now (and cached); None where the trial would take longer than TRIAL_SECONDS (`predicted`:
    the model's seconds of the best grid's epoch)."""
    if 2 * predicted * TRIAL_EPOCHS * len(grids) > TRIAL_SECONDS:
        return None
    path, key = trials_path(), trial_key(config, grids)
    known = _read(path)
    if key in known:
        report(f"--grid auto: the {len(grids)} grids' epochs as timed on this machine before ({path})")
        return known[key]
    report(
        f"--grid auto: timing {len(grids)} grids close to the model's best, {TRIAL_EPOCHS} epochs each "
        f"(once for this store, model and machine; cached in {path})"
    )
    cases = [
        (str(grid), config.replace(grid=grid.dims, placement=grid.placement, epochs=TRIAL_EPOCHS))
        for grid in grids
    ]
    ranks = grids[0].size
    with tempfile.TemporaryDirectory(prefix="gtool-trial-") as scratch:
        out = str(Path(scratch) / "epochs")
        run_local(ranks, timed_epochs_rank, cases, WARMUP, out)
        per_rank = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(ranks)]
    measured = {name: _epoch_seconds([mine[name] for mine in per_rank]) for name, _ in cases}
    known[key] = measured
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1))
    except OSError as exc:
        report(f"--grid auto: the trial is not cached: {path} cannot be written ({exc.strerror})")
    return measured


def _epoch_seconds(ranks: list[list[list[float]]]) -> float:
    """The median over steady epochs of the slowest rank's seconds (per rank, epoch: the phases, seconds
    first)."""
    seconds = np.array(ranks)[:, :, 0]
    return float(np.median(seconds.max(axis=0)))


def _read(path: Path) -> dict[str, dict[str, float]]:
    """The cached trials; none where the file is missing or not what this gtool writes."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}
