"""`gtool plan --calibrate`: short microbenchmarks of the operations an epoch is made of, on this machine.

SpMM on double-permuted R-MAT matrices at several sizes, widths and degrees; dense products of the
trainer's shapes; element-wise passes; the trainer's fused ReLU and dropout; fresh tensors of growing size
(the allocator's page faults); all-reduces of growing size in groups of 2, 4, ... local processes over the
chosen backend. Every figure is the best of a few repetitions after a warm-up, and the fitted costs
(gtool.plan.costmodel.profile) keep the measurements they came from. Short real epochs then measure what
the microbenchmarks miss (gtool.plan.calibration.epochs).
"""

from __future__ import annotations

import datetime
import functools
import json
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

from gtool.loader import csr_tensor
from gtool.plan.calibration.epochs import calibrate_epochs
from gtool.plan.calibration.fit import fit_relative
from gtool.plan.costmodel.profile import (
    AllocationCost,
    CollectiveCost,
    DeviceProfile,
    DropoutCost,
    ElementwiseCost,
    GemmCost,
    SpmmCost,
)
from gtool.preprocess import rmat_block
from gtool.trainer import MaskSpec, RankEnv, join_world, launch_local, rank_device, relu_dropout

SPMM_SCALES = (12, 14, 16, 18)
SPMM_WIDTHS = (16, 64, 128)
SPMM_DEGREES = (4, 16)
GEMM_SHAPES = (
    (1 << 14, 16, 16),
    (1 << 17, 32, 32),
    (1 << 17, 128, 32),
    (1 << 17, 32, 128),
    (1 << 17, 128, 128),
)
ELEMENTWISE_SIZES = (1 << 16, 1 << 20, 1 << 23)
MESSAGE_BYTES = tuple(1 << k for k in range(10, 27, 2))
REDUCE_RUN_BYTES = 1 << 26
ALLOCATION_BYTES = tuple(1 << k for k in range(20, 28))
REPEATS = 3
GROUPS = (2, 4, 8, 16, 32)

Report = Callable[[str], None]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(call: Callable[[], object], device: torch.device, repeats: int = REPEATS) -> float:
    """The fastest of `repeats` timed calls after one untimed warm-up."""
    call()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def rmat_matrix(scale: int, degree: int, device: torch.device, seed: int = 7) -> torch.Tensor:
    """A 2^scale square symmetric R-MAT matrix with about `degree` nonzeros per row, rows and columns
    permuted at random (as gtool shard leaves an undirected graph), as float32 torch CSR."""
    n = 1 << scale
    src, dst = rmat_block(scale, seed, 0, degree * n // 2)
    src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    rng = np.random.default_rng(seed)
    rows, cols = rng.permutation(n)[src], rng.permutation(n)[dst]
    csr = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    csr.sum_duplicates()
    return csr_tensor(
        torch.from_numpy(csr.indptr.astype(np.int64)),
        torch.from_numpy(csr.indices.astype(np.int64)),
        torch.from_numpy(csr.data),
        csr.shape,
    ).to(device)


def _spmm_seconds(matrix: torch.Tensor, width: int, device: torch.device) -> float:
    dense = torch.rand(matrix.shape[1], width, device=device)
    out = torch.empty(matrix.shape[0], width, device=device)
    return best_seconds(lambda: torch.mm(matrix, dense, out=out), device)


def calibrate_spmm(
    device: torch.device, report: Report, scales: tuple[int, ...] | None = None
) -> tuple[SpmmCost, list[dict]]:
    """SpMM cost: per-call and per-row costs fitted over every point (with one per-nonzero cost per size),
    then per (width, size) the per-nonzero cost left once those are taken off, averaged over degrees;
    on matrices of 2^scale rows for each of `scales` (default SPMM_SCALES)."""
    scales = scales or SPMM_SCALES
    points = []
    for scale in scales:
        report(f"SpMM 2^{scale} rows")
        matrices = {d: rmat_matrix(scale, d, device) for d in SPMM_DEGREES}
        for width in SPMM_WIDTHS:
            for degree, matrix in matrices.items():
                seconds = _spmm_seconds(matrix, width, device)
                nnz = int(matrix.values().shape[0])
                points.append(
                    {"rows": 1 << scale, "nnz": nnz, "width": width, "degree": degree, "seconds": seconds}
                )
    rows = [[1.0, p["rows"] * p["width"]] + _scale_columns(p, scales) for p in points]
    fitted = fit_relative(rows, [p["seconds"] for p in points])
    call, row_cost = float(fitted[0]), float(fitted[1])
    table = np.zeros((len(SPMM_WIDTHS), len(scales)))
    for p in points:
        w, s = SPMM_WIDTHS.index(p["width"]), scales.index(int(np.log2(p["rows"])))
        left = max(p["seconds"] - call - p["rows"] * p["width"] * row_cost, 0.0) / (p["nnz"] * p["width"])
        table[w, s] += left / len(SPMM_DEGREES)
    dense_bytes = [float((1 << s) * 4) for s in scales]
    cost = SpmmCost(
        widths=list(SPMM_WIDTHS),
        dense_bytes=dense_bytes,
        seconds_per_nnz_col=table.tolist(),
        seconds_per_row_col=row_cost,
        seconds_per_call=call,
    )
    return _per_width_dense_bytes(cost), points


def _scale_columns(point: dict, scales: tuple[int, ...]) -> list[float]:
    """nnz * width in the column of the point's size (per-nonzero cost shared by widths and degrees)."""
    columns = [0.0] * len(scales)
    columns[scales.index(int(np.log2(point["rows"])))] = point["nnz"] * point["width"]
    return columns


def _per_width_dense_bytes(cost: SpmmCost) -> SpmmCost:
    """The table indexed by dense-operand bytes (cols x width x 4) rather than cols, per width.

    Each width's row of the table is resampled onto one common axis of bytes so that interpolation can
    be done in (width, bytes)."""
    axis = sorted({c * w for c in cost.dense_bytes for w in cost.widths})
    table = [
        np.interp(np.log(axis), np.log([c * w for c in cost.dense_bytes]), row).tolist()
        for w, row in zip(cost.widths, cost.seconds_per_nnz_col, strict=True)
    ]
    return SpmmCost(
        cost.widths, [float(a) for a in axis], table, cost.seconds_per_row_col, cost.seconds_per_call
    )


def calibrate_gemm(
    device: torch.device, shapes: tuple[tuple[int, int, int], ...] | None = None
) -> tuple[GemmCost, list[dict]]:
    points = []
    for m, k, n in shapes or GEMM_SHAPES:
        for left, right in (((m, k), (k, n)), ((k, m), (m, n))):
            a, b = torch.rand(*left, device=device), torch.rand(*right, device=device)
            seconds = best_seconds(functools.partial(torch.matmul, a, b), device)
            points.append({"m": left[0], "k": left[1], "n": right[1], "seconds": seconds})
    rows = [
        [2 * p["m"] * p["k"] * p["n"], 4 * (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]), 1]
        for p in points
    ]
    flop, byte, call = fit_relative(rows, [p["seconds"] for p in points])
    return GemmCost(float(flop), float(byte), float(call)), points


def calibrate_elementwise(device: torch.device) -> tuple[ElementwiseCost, list[dict]]:
    points: list[dict[str, Any]] = []
    for size in ELEMENTWISE_SIZES:
        x = torch.rand(size, device=device)
        for name, op in (
            ("relu", functools.partial(torch.relu, x)),
            ("mul", functools.partial(torch.mul, x, x)),
        ):
            points.append({"op": name, "elements": size, "seconds": best_seconds(op, device)})
    byte, call = fit_relative([[8 * p["elements"], 1] for p in points], [p["seconds"] for p in points])
    return ElementwiseCost(float(byte), float(call)), points


def calibrate_dropout(device: torch.device) -> tuple[DropoutCost, list[dict]]:
    """The trainer's own fused ReLU + dropout (gtool.trainer.nn.dropout) on blocks of a few shapes."""
    points = []
    spec = MaskSpec.of(0, 1, 1, 0.5, 1 << 20)
    for rows, width in ((1 << 12, 16), (1 << 12, 128), (1 << 16, 16), (1 << 16, 128), (1 << 18, 64)):
        x = torch.randn(rows, width, device=device)
        seconds = best_seconds(
            functools.partial(relu_dropout, x, spec, (0, x.shape[0], 0, x.shape[1])), device
        )
        points.append({"rows": rows, "width": width, "seconds": seconds})
    fitted = fit_relative([[p["rows"] * p["width"], 1] for p in points], [p["seconds"] for p in points])
    return DropoutCost(float(fitted[0]), float(fitted[1])), points


def calibrate_allocation(
    device: torch.device, sizes: tuple[int, ...] | None = None
) -> tuple[AllocationCost, list[dict]]:
    """Per size, the seconds per byte that creating, filling and freeing a tensor takes beyond filling
    one that exists (the page faults of memory fresh from the operating system), in steady state: the
    allocator has seen the size before, as in every epoch after the first."""
    points = []
    for nbytes in sizes or ALLOCATION_BYTES:
        existing = torch.empty(nbytes // 4, device=device)
        fill = best_seconds(functools.partial(existing.fill_, 1.0), device)
        del existing
        fresh = best_seconds(functools.partial(torch.ones, nbytes // 4, device=device), device)
        points.append({"bytes": nbytes, "fill": fill, "fresh": fresh})
    per_byte = [max(p["fresh"] - p["fill"], 0.0) / p["bytes"] for p in points]
    return AllocationCost([float(p["bytes"]) for p in points], per_byte), points


def _all_reduce_seconds(tensor: torch.Tensor, group: dist.ProcessGroup, device: torch.device) -> float:
    """Seconds per all-reduce of `tensor` in `group`: runs of back-to-back calls (enough to move about
    REDUCE_RUN_BYTES, 4 to 64 of them) started together after a barrier; the median run, after one
    untimed call. Every rank of the group makes the same calls."""
    nbytes = tensor.numel() * tensor.element_size()
    calls = min(64, max(4, REDUCE_RUN_BYTES // nbytes))
    dist.all_reduce(tensor, group=group)
    runs = []
    for _ in range(REPEATS):
        dist.barrier(group=group)
        _sync(device)
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(tensor, group=group)
        _sync(device)
        runs.append((time.perf_counter() - start) / calls)
    return float(np.median(runs))


def _collective_rank(
    env: RankEnv, groups: list[int], message_bytes: tuple[int, ...], backend: str, device_type: str, out: str
) -> None:
    """One process of the collective benchmark: time all-reduces of each size in each group of the first g
    ranks (sizes are passed in: a spawned process sees the module's defaults, not a caller's)."""
    device = rank_device(env, device_type, backend)
    torch.set_num_threads(1)
    join_world(env, backend, timedelta(seconds=120))
    results: dict[str, list] = {}
    for size in groups:
        group = dist.new_group(list(range(size)))
        if env.rank >= size:
            continue
        points = []
        for nbytes in message_bytes:
            tensor = torch.ones(nbytes // 4, device=device)
            points.append([nbytes, _all_reduce_seconds(tensor, group, device)])
        results[str(size)] = points
    dist.barrier()
    if env.rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def calibrate_collectives(
    backend: str, device: torch.device, max_group: int
) -> tuple[dict[int, CollectiveCost], dict[str, list]]:
    """All-reduce latency and per-wire-byte cost for groups of 2, 4, ... up to `max_group` processes."""
    groups = [g for g in GROUPS if g <= max_group]
    if not groups:
        return {}, {}
    with tempfile.TemporaryDirectory(prefix="gtool-calibrate-") as scratch:
        out = str(Path(scratch) / "collectives.json")
        launch_local(max(groups), _collective_rank, groups, MESSAGE_BYTES, backend, device.type, out)
        measured = json.loads(Path(out).read_text())
    costs = {}
    for size, points in measured.items():
        g = int(size)
        wire = [2 * (g - 1) / g * nbytes for nbytes, _ in points]
        latency, per_byte = fit_relative([[1, w] for w in wire], [s for _, s in points])
        costs[g] = CollectiveCost(float(latency), float(per_byte))
    return costs, measured


def calibrate(device_name: str, threads: int, max_group: int, report: Report) -> tuple[DeviceProfile, dict]:
    """Measure this machine: a profile, and the raw measurements it was fitted on."""
    if device_name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA GPU here")
    device = torch.device("cuda", 0) if device_name == "cuda" else torch.device("cpu")
    backend = "nccl" if device_name == "cuda" else "gloo"
    if device_name == "cuda":
        max_group = min(max_group, torch.cuda.device_count())
    torch.set_num_threads(threads)
    spmm, spmm_points = calibrate_spmm(device, report)
    report("dense products, element-wise passes, dropout masks")
    gemm, gemm_points = calibrate_gemm(device)
    elementwise, elementwise_points = calibrate_elementwise(device)
    dropout, dropout_points = calibrate_dropout(device)
    allocation, allocation_points = calibrate_allocation(device)
    report(f"all-reduce over {backend} in groups of up to {max_group} processes")
    collectives, collective_points = calibrate_collectives(backend, device, max_group)
    profile = DeviceProfile(
        device_name, backend, threads, spmm, gemm, elementwise, dropout, allocation, collectives
    )
    groups = [g for g in GROUPS if g <= max_group]
    epochs, epoch_points = calibrate_epochs(profile, backend, device.type, threads, groups, report)
    made_on = {
        "host": platform.node(),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
    }
    profile = replace(profile, epochs=epochs, made_on=made_on)
    measurements = {
        "spmm": spmm_points,
        "gemm": gemm_points,
        "elementwise": elementwise_points,
        "dropout": dropout_points,
        "allocation": allocation_points,
        "all_reduce": collective_points,
        "epochs": epoch_points,
    }
    return profile, measurements
