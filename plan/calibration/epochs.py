"""Short real training epochs that calibrate what the microbenchmarks cannot see (`gtool plan --calibrate`).

The microbenchmarks time each operation alone and warm; a real epoch runs them cold, in the trainer's
order, with ranks sharing the machine and waiting for each other, and with Python and autograd around
them. So gtool trains a few epochs on small R-MAT stores on 1 and on k ranks (every k x 1 x 1, 1 x k x 1
and 1 x 1 x k grid) and fits, per k, the factors of gtool.plan.costmodel.profile.EpochFactors to the
trainer's own phase times (the fits: docs/plan.md, Profiles). The first WARMUP epochs are left out.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gtool.plan.calibration.fit import fit_relative
from gtool.plan.costmodel.planner import PlanRequest, estimate_grid
from gtool.plan.costmodel.profile import DeviceProfile, EpochFactors
from gtool.store.cells import shard_table
from gtool.store.reader import open_store
from gtool.trainer import (
    GroupCache,
    PhaseTimer,
    RankEnv,
    TrainConfig,
    Trainer,
    grid_comm,
    join_world,
    model_grid,
    rank_device,
    run_local,
    start_numba,
)

EPOCH_SCALES = (14, 16)
EPOCH_HIDDENS = (32, 128)
EPOCHS = 6
WARMUP = 2
PHASES = ("seconds", "spmm", "dense", "comm")

Report = Callable[[str], None]


def timed_epochs_rank(env: RankEnv, cases: list[tuple[str, TrainConfig]], warmup: int, out: str) -> None:
    """One of k ranks: train every case (all grids of k ranks) for its epochs and write the phase times
    of each epoch after the first `warmup` to OUT.RANK (settings come as arguments: a spawned process
    sees the module's defaults, not a caller's)."""
    config = cases[0][1]
    device = rank_device(env, config.runtime.device_type, config.runtime.backend)
    torch.set_num_threads(config.runtime.threads)
    start_numba()  # these short runs train with the kernels, as the runs whose epochs they calibrate do
    join_world(env, config.runtime.backend, timedelta(seconds=300))
    results: dict[str, list[list[float]]] = {}
    made: GroupCache = {}
    for name, config in cases:
        grid = config.process_grid
        comm = grid_comm(grid, config.runtime.timeout, PhaseTimer(device), device, made)
        comm.cast_all_reduces(config.cast_dtype)
        trainer = Trainer(model_grid(config, comm, device), config)
        records = [trainer.train_epoch(epoch) for epoch in range(1, config.runtime.epochs + 1)]
        results[name] = [[getattr(r, phase) for phase in PHASES] for r in records[warmup:]]
        del trainer
    dist.barrier()
    dist.destroy_process_group()
    Path(f"{out}.{env.rank}").write_text(json.dumps(results))


def _grids(k: int) -> list[tuple[int, int, int]]:
    return [(1, 1, 1)] if k == 1 else [(k, 1, 1), (1, k, 1), (1, 1, k)]


def _modelled(config: TrainConfig, profile: DeviceProfile) -> tuple[float, float, float, int]:
    """The microbenchmark model's seconds of one epoch of `config`: SpMM and dense (mean over ranks),
    communication, and the number of collectives."""
    store = open_store(config.store)
    grid = config.process_grid
    request = PlanRequest(grid.size, config.model)
    widths = config.model.widths(store.num_features, store.num_classes)
    table = shard_table(store, set(grid.dims))
    estimate = estimate_grid(grid, table, widths, request, profile, store.num_classes, 1, store.num_features)
    spmm, dense = estimate.time.spmm.sum(axis=1).mean(), estimate.time.dense.sum(axis=1).mean()
    return float(spmm), float(dense), estimate.time.comm, len(estimate.collectives)


def _slope(measured: np.ndarray, modelled: np.ndarray, layers: np.ndarray) -> float:
    """f of measured ~ f * modelled + c * layers over runs (non-negative, relative errors): the factor on
    the modelled seconds, apart from a fixed cost per layer (which the overhead takes up). Runs that
    cannot tell the two apart (one run, or a slope fitted to 0) give measured over modelled seconds."""
    ratio = float(measured.sum() / modelled.sum())
    if len(measured) < 2:
        return ratio
    slope = float(fit_relative(np.column_stack([modelled, layers]).tolist(), measured.tolist())[0])
    return slope if slope > 0 else ratio


def _factors(measured: dict[str, list[list[list[float]]]], cases: dict, profile: DeviceProfile) -> dict:
    """EpochFactors (as a dict) of one k from every rank's steady epochs of every case (the module
    docstring has the formulas); measured figures are means over ranks and epochs, modelled SpMM and
    dense seconds include their page faults."""
    rows = []
    for name, config in cases.items():
        epochs = np.array(measured[name])  # rank, epoch, phase (epoch, SpMM, dense, comm)
        modelled_spmm, modelled_dense, comm, count = _modelled(config, profile)
        seconds, spmm, dense, comm_measured = epochs.mean(axis=(0, 1))
        rows.append(
            (
                modelled_spmm,
                modelled_dense,
                comm,
                count,
                config.model.layers,
                seconds,
                spmm,
                dense,
                comm_measured,
            )
        )
    model_s, model_d, comms, counts, layers, all_seconds, spmms, denses, comms_measured = map(
        np.array, zip(*rows, strict=True)
    )
    factors = {"spmm": _slope(spmms, model_s, layers), "dense": _slope(denses, model_d, layers)}
    factors["allocation"] = _slope(spmms + denses, model_s + model_d, layers)
    left = all_seconds - comms_measured - factors["spmm"] * model_s - factors["dense"] * model_d
    collectives = counts.sum()
    return {
        **{kind: float(value) for kind, value in factors.items()},
        "collective_latency": max(float((comms_measured - comms).sum()) / collectives, 0.0)
        if collectives
        else 0.0,
        "overhead_per_layer": max(float(np.mean(left / layers)), 0.0),
    }


def _stores(scratch: Path, report: Report) -> dict[str, str]:
    """The calibration stores, built in `scratch`, by source."""
    from gtool.preprocess import ShardOptions, shard

    stores = {}
    for scale in EPOCH_SCALES:
        source = f"rmat:{scale}:8"
        report(f"building the calibration store {source}")
        stores[source] = str(scratch / f"rmat-{scale}-8.zarr")
        shard(
            source,
            stores[source],
            ShardOptions(tiles=8, num_features=128, num_classes=32, seed=11, workers=1),
        )
    return stores


def calibrate_epochs(
    profile: DeviceProfile,
    backend: str,
    device_type: str,
    threads: int,
    groups: list[int],
    report: Report,
) -> tuple[dict[int, EpochFactors], dict]:
    """EpochFactors for 1 rank and for each k of `groups` ranks side by side, from real epochs; and the
    measured phase times (seconds per rank, epoch and phase: epoch, SpMM, dense, comm) with the factors
    fitted on them. `profile` is the microbenchmarks' profile (its own epoch factors are ignored)."""
    base = replace(profile, epochs={})
    factors, raw = {}, {}
    with tempfile.TemporaryDirectory(prefix="gtool-calibrate-") as scratch:
        stores = _stores(Path(scratch), report)
        for k in [1, *sorted(groups)]:
            report(f"training epochs on {k} rank(s) side by side")
            cases = {
                f"{source}-h{hidden}-{'x'.join(map(str, grid))}": TrainConfig.of(
                    store,
                    grid,
                    hidden=hidden,
                    epochs=EPOCHS,
                    threads=threads,
                    backend=backend,
                    device=device_type,
                )
                for source, store in stores.items()
                for hidden in EPOCH_HIDDENS
                for grid in _grids(k)
            }
            out = str(Path(scratch) / f"k{k}")
            run_local(k, timed_epochs_rank, list(cases.items()), WARMUP, out)
            per_rank = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(k)]
            measured = {name: [mine[name] for mine in per_rank] for name in cases}
            fitted = _factors(measured, cases, base)
            factors[k] = EpochFactors(**fitted)
            raw[str(k)] = {"runs": measured, "factors": fitted}
    return factors, raw
