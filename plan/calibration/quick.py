"""The automatic calibration of `gtool plan` (seconds, in this process, on the CPU): what ranks on this
machine cost, measured the way they will run here.

Compute: the microbenchmarks (gtool.plan.calibration.microbench) at small sizes, and a layer's fixed
cost. All-reduces: timed between threads of this process over gloo, k threads in k/g groups of g
reducing at once, as the groups of one grid axis do. k ranks of one thread share the machine's cores.
"""

from __future__ import annotations

import datetime
import platform
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gtool.cores import available_cores
from gtool.plan.calibration.microbench import (
    Report,
    best_seconds,
    calibrate_allocation,
    calibrate_dropout,
    calibrate_elementwise,
    calibrate_gemm,
    calibrate_spmm,
)
from gtool.plan.costmodel.profile import AllocationCost, CollectiveCost, DeviceProfile, EpochFactors

SPMM_SCALES = (11, 13, 15)
GEMM_SHAPES = ((1 << 14, 16, 16), (1 << 15, 128, 32), (1 << 15, 32, 128), (1 << 15, 128, 128))
ALLOCATION_BYTES = tuple(1 << k for k in range(20, 26))
SIDE_BY_SIDE = (2, 4, 8)
"""The numbers k of ranks side by side that are priced, and the group sizes of the all-reduces."""
MESSAGE_BYTES = (1 << 10, 1 << 22)
CALLS = 5
REPEATS = 3
"""Runs of CALLS timed calls per all-reduce measured (after one untimed call): the fastest run's median
counts, as other work on the machine only ever slows a run down."""


def _in_threads(k: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _all_reduce_seconds(k: int, g: int, sizes: tuple[int, ...]) -> tuple[list[float], list[float]]:
    """Per size in bytes, all-reduces in groups of g, k threads in k/g groups reducing at once: the
    seconds of one (the median call of a run) and the CPU seconds each rank spends on one (the run's
    CPU time of the process over its calls and ranks), each the least of REPEATS runs of CALLS calls."""
    store = dist.HashStore()
    groups: list[Any] = [None] * k  # ProcessGroupGloo

    def join(i: int) -> None:
        prefixed = dist.PrefixStore(f"group{i // g}", store)
        groups[i] = dist.ProcessGroupGloo(prefixed, i % g, g, timedelta(seconds=60))

    _in_threads(k, join)
    start = threading.Barrier(k)
    runs: dict[int, list[list[float]]] = {size: [[] for _ in range(REPEATS)] for size in sizes}
    cpu: dict[int, list[float]] = {size: [] for size in sizes}

    def thread(i: int) -> None:
        group = groups[i]
        assert group is not None
        for size in sizes:
            tensor = torch.ones(size // 4)
            group.allreduce([tensor]).wait()
            for run in runs[size]:
                start.wait()
                began_cpu = time.process_time()
                for _ in range(CALLS):
                    began = time.perf_counter()
                    group.allreduce([tensor]).wait()
                    run.append(time.perf_counter() - began)
                start.wait()
                if i == 0:
                    cpu[size].append((time.process_time() - began_cpu) / (CALLS * k))

    _in_threads(k, thread)
    seconds = [min(float(np.median(run)) for run in runs[size]) for size in sizes]
    return seconds, [min(cpu[size]) for size in sizes]


def _line(wire: list[float], seconds: list[float]) -> tuple[float, float]:
    """(seconds at no bytes, seconds per wire byte) through the smallest and largest message."""
    per_byte = max((seconds[-1] - seconds[0]) / (wire[-1] - wire[0]), 0.0)
    return max(seconds[0] - wire[0] * per_byte, 0.0), per_byte


def _collective_costs(ks: list[int]) -> tuple[dict[int, CollectiveCost], dict]:
    """Per group size g: its all-reduces' latency and cost per wire byte with g ranks running, and the
    CPU seconds per rank (per call and per wire byte) with the most ranks, max(ks), in groups of g."""
    costs, points = {}, {}
    for g in ks:
        alone, cpu = _all_reduce_seconds(g, g, MESSAGE_BYTES)
        if g < max(ks):
            _, cpu = _all_reduce_seconds(max(ks), g, MESSAGE_BYTES)
        wire = [2 * (g - 1) / g * nbytes for nbytes in MESSAGE_BYTES]
        costs[g] = CollectiveCost(*_line(wire, alone), *_line(wire, cpu))
        points[f"{g}/{g}"] = list(zip(MESSAGE_BYTES, alone, strict=True))
        points[f"{g}/{max(ks)} cpu"] = list(zip(MESSAGE_BYTES, cpu, strict=True))
    return costs, points


def _layer_overhead() -> float:
    """Seconds of a layer's forward and backward on blocks too small to compute: what dispatch, autograd
    and Python cost per layer, apart from the work."""
    weight = torch.rand(8, 8, requires_grad=True)
    inputs = torch.rand(16, 8)
    mask = torch.ones(16, 8)

    def layer() -> None:
        hidden = torch.relu(inputs @ weight) * mask
        (hidden @ weight).sum().backward()

    return best_seconds(layer, torch.device("cpu"), repeats=CALLS)


def _epoch_factors(ks: list[int], cores: int) -> dict[int, EpochFactors]:
    """Per k (1 included): k ranks of one thread each share the machine's `cores`, so their work, and
    their overhead per layer, take max(1, k / cores) times as long (their collectives: the profile's
    `cores` and CPU seconds per collective)."""
    overhead = _layer_overhead()
    factors = {1: EpochFactors(overhead_per_layer=overhead)}
    for k in ks:
        slower = max(1.0, k / cores)
        factors[k] = EpochFactors(slower, slower, slower, 0.0, overhead * slower)
    return factors


def quick_calibrate(report: Report) -> tuple[DeviceProfile, dict]:
    """This machine's CPU profile in a few seconds, and the measurements it was fitted on."""
    device = torch.device("cpu")
    cores = available_cores()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every local rank runs (gtool train --threads 1)
    try:
        report("SpMM")
        spmm, spmm_points = calibrate_spmm(device, lambda what: None, SPMM_SCALES)
        report("dense products, element-wise passes, dropout masks")
        gemm, gemm_points = calibrate_gemm(device, GEMM_SHAPES)
        elementwise, elementwise_points = calibrate_elementwise(device)
        dropout, dropout_points = calibrate_dropout(device)
        measured, allocation_points = calibrate_allocation(device, ALLOCATION_BYTES)
        per_byte = float(np.median(measured.seconds_per_byte))  # one figure: a few runs' noise is larger
        allocation = AllocationCost(measured.sizes, [per_byte] * len(measured.sizes))
        report("all-reduces and ranks side by side")
        collectives, collective_points = _collective_costs(list(SIDE_BY_SIDE))
        epochs = _epoch_factors(list(SIDE_BY_SIDE), cores)
    finally:
        torch.set_num_threads(threads)
    made_on = {
        "host": platform.node(),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "device_name": platform.processor(),
        "cores": cores,
        "calibration": "automatic (gtool plan, seconds)",
    }
    profile = DeviceProfile(
        "cpu",
        "gloo",
        1,
        spmm,
        gemm,
        elementwise,
        dropout,
        allocation,
        collectives,
        epochs,
        made_on,
        cores=cores,
    )
    measurements = {
        "spmm": spmm_points,
        "gemm": gemm_points,
        "elementwise": elementwise_points,
        "dropout": dropout_points,
        "allocation": allocation_points,
        "all_reduce": collective_points,
    }
    return profile, measurements
