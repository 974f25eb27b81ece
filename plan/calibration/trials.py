"""`--grid auto`'s trial: a few epochs of each grid the model predicts close to the best, on the run's own
store, model and local ranks, timed once and cached per machine (gtool.plan.costmodel.auto chooses).

Ranks that share a machine's cores slow each other down in ways the microbenchmarks do not see: on the
README's demo store, 8 ranks on 2 cores, the grid the model ranks first measures 15-20% slower than the
fastest (docs/plan.md, --grid auto). The trial trains TRIAL_EPOCHS epochs of every grid in one launch of
the ranks, and an epoch's figure is the median over the steady epochs of the slowest rank's seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.plan.calibration.epochs import timed_epochs_rank
from gtool.plan.calibration.machine import machine_trials_path
from gtool.store.reader import open_store
from gtool.store.writing.atomic import write_atomically
from gtool.store.writing.staging import is_url
from gtool.trainer import TrainConfig, run_local
from gtool.version import __version__

TRIAL_EPOCHS = 3
WARMUP = 1
"""Epochs each grid trains in the trial, and the first ones of them left out (loading, first touches)."""
TRIAL_SECONDS = 30.0
"""The model's pick stands where the trial would take longer than this, as estimated by `trial_seconds`."""
START_SECONDS = 3.0
"""Starting the trial's ranks, as estimated: a supervisor that imports torch, the ranks forked from it."""
ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS")
"""Variables that change how fast the ranks run, and so what a trial measured."""


def trial_seconds(predicted: list[float]) -> float:
    """The trial's estimated seconds, from the model's epoch of each grid: every grid loads (about an
    epoch) and trains TRIAL_EPOCHS epochs, each twice as long as predicted (the model under-predicts ranks
    that share cores about that much), after the ranks start."""
    return START_SECONDS + 2 * (TRIAL_EPOCHS + 1) * sum(predicted)


def trial_key(config: TrainConfig, grids: list[ProcessGrid]) -> str:
    """What a trial's figures hold for: the store (where it is and its metadata), the model, gtool's
    version, the ranks' threads, backend, devices and environment, and the grids with their placements."""
    store = open_store(config.store)
    runtime = config.runtime
    parts = [
        config.store if is_url(config.store) else os.path.abspath(config.store),
        json.dumps(store.meta.to_dict(), sort_keys=True, default=str),
        repr(config.model),
        __version__,
        f"{runtime.threads} {runtime.backend} {runtime.device_type} {runtime.eval_every}",
        " ".join(f"{name}={os.environ.get(name, '')}" for name in ENVIRONMENT),
        " ".join(f"{grid}/{grid.placement}" for grid in grids),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def time_grids(
    config: TrainConfig, grids: list[ProcessGrid], predicted: list[float], report: Callable[[str], None]
) -> dict[str, float] | None:
    """Seconds of an epoch of `config` on each of `grids` (by GXxGYxGZ), from this machine's cache or a
    trial run now (and cached); None where the trial would take longer than TRIAL_SECONDS (`predicted`:
    the model's seconds of each grid's epoch) or failed (said through `report`: the model's pick stands)."""
    estimate = trial_seconds(predicted)
    if estimate > TRIAL_SECONDS:
        return None
    path, key = machine_trials_path(), trial_key(config, grids)
    known = _read(path)
    if key in known and set(known[key]) == {str(grid) for grid in grids}:
        report(f"--grid auto: the {len(grids)} grids' epochs as timed on this machine before ({path})")
        return known[key]
    report(
        f"--grid auto: timing the {len(grids)} grids predicted close to the best, {TRIAL_EPOCHS} epochs each "
        f"(about {estimate:.0f} s, once for this store, model and machine; cached in {path})"
    )
    cases = [
        (str(grid), config.replace(grid=grid.dims, placement=grid.placement, epochs=TRIAL_EPOCHS))
        for grid in grids
    ]
    ranks = grids[0].size
    with tempfile.TemporaryDirectory(prefix="gtool-trial-") as scratch:
        out = str(Path(scratch) / "epochs")
        try:
            run_local(ranks, timed_epochs_rank, cases, WARMUP, out)
        except GtoolError as failed:  # a rank failed: the grid the model picks may still train
            details = getattr(failed, "details", "")
            report(f"--grid auto: the trial failed ({failed}); the model's pick stands{details and ':'}")
            if details:
                report(details)
            return None
        per_rank = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(ranks)]
    measured = {name: _epoch_seconds([mine[name] for mine in per_rank]) for name, _ in cases}
    known[key] = measured
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(str(path), lambda out: out.write(json.dumps(known, indent=1).encode()))
    except OSError as exc:
        report(f"--grid auto: the trial is not cached: {path} cannot be written ({exc.strerror})")
    return measured


def _epoch_seconds(ranks: list[list[list[float]]]) -> float:
    """The median over steady epochs of the slowest rank's seconds (per rank, epoch: the phases, seconds
    first)."""
    seconds = np.array(ranks)[:, :, 0]
    return float(np.median(seconds.max(axis=0)))


def _read(path: Path) -> dict[str, dict[str, float]]:
    """The cached trials; none where the file is missing or not what this gtool writes, and of those it
    holds only the ones of the form it writes (grid -> positive seconds: a hand-edited or damaged entry is
    timed afresh, not compared)."""
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(content, dict):
        return {}
    return {key: timing for key, timing in content.items() if _is_timing(timing)}


def _is_timing(value: object) -> bool:
    """Whether `value` is a trial's timing: a mapping of grids to finite positive seconds."""
    return isinstance(value, dict) and all(
        isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) and s > 0
        for s in value.values()
    )
