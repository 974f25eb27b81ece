"""How much slower each of k ranks computes while all k compute at once on one machine.

Two workloads sized beyond the caches, as the epochs of large graphs are: an SpMM (a 2^SIDE_SCALE-row
R-MAT matrix, about 16 nonzeros per row, times a 64-wide dense block: a random gather) and a dense step (a
2^(SIDE_SCALE+1) x 128 block times a 128 x 128 weight, then a ReLU pass: streaming through memory),
and a fresh 2^(SIDE_SCALE+10)-byte tensor filled (the page faults of a large allocation). k
processes, each with a rank's thread count, start together after a barrier and repeat one workload for
SIDE_SECONDS; the median repetition over the median of one process alone is the factor of that kind of
work (shared memory bandwidth, caches and, when k ranks oversubscribe the cores, the cores themselves).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gtool.trainer.launch import RankEnv, join_world, run_local

SIDE_SCALE = 16
SIDE_SECONDS = 1.5
KINDS = ("spmm", "dense", "allocation")


def _workloads(scale: int) -> dict[str, Callable[[], object]]:
    from gtool.plan.calibrate import rmat_matrix

    matrix = rmat_matrix(scale, 16, torch.device("cpu"))
    operand = torch.rand(matrix.shape[1], 64)
    block, weight = torch.rand(2 << scale, 128), torch.rand(128, 128)
    return {
        "spmm": lambda: torch.mm(matrix, operand),
        "dense": lambda: torch.relu(block @ weight),
        "allocation": lambda: torch.empty(1 << (scale + 8)).fill_(1.0),
    }


def _side_rank(env: RankEnv, scale: int, threads: int, seconds: float, out: str) -> None:
    """One of k processes: per workload, the median time of its repetitions while all k repeat it."""
    torch.set_num_threads(threads)
    join_world(env, "gloo", timedelta(seconds=300))
    medians = {}
    for kind, work in _workloads(scale).items():
        work()
        dist.barrier()
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds:
            began = time.perf_counter()
            work()
            times.append(time.perf_counter() - began)
        medians[kind] = float(np.median(times))
    dist.barrier()
    dist.destroy_process_group()
    Path(f"{out}.{env.rank}").write_text(json.dumps(medians))


def _side_factors(ranks: list[dict[str, float]], alone: dict[str, float]) -> dict[str, float]:
    """Per kind of work, the median process's seconds over one process's alone (at least 1)."""
    return {kind: max(1.0, float(np.median([r[kind] for r in ranks])) / alone[kind]) for kind in KINDS}


def calibrate_side_by_side(groups: list[int], threads: int) -> tuple[dict[int, dict[str, float]], dict]:
    """Per k in `groups`, the factor of each kind of work (KINDS) with k CPU ranks computing at once;
    and every process's median seconds per k."""
    measured = {}
    with tempfile.TemporaryDirectory(prefix="gtool-calibrate-") as scratch:
        for k in [1, *groups]:
            out = str(Path(scratch) / f"k{k}")
            run_local(k, _side_rank, SIDE_SCALE, threads, SIDE_SECONDS, out)
            measured[str(k)] = [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(k)]
    alone = measured["1"][0]
    factors = {k: _side_factors(measured[str(k)], alone) for k in groups}
    return factors, measured
