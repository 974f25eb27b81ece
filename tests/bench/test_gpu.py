"""bench/gpu.sh, the GPU benchmark's one command, run as it is with --dry-run: every step on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench import gpu
from tests.support.paths import REPO

pytestmark = pytest.mark.integration  # runs the benchmark's command


def test_the_gpu_benchmark_runs_every_step_on_the_cpu() -> None:
    environment = {**os.environ, "PYTHON": sys.executable}
    run = subprocess.run(
        ["bash", "bench/gpu.sh", "--dry-run"], cwd=REPO, env=environment, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    steps = (
        "check",
        "train: rmat:9:4 on cpu",
        "test: the CUDA tests",
        "calibrate",
        "shard: bench_shard's sweep",
    )
    for step in (*steps, "results"):
        assert f"== {step}" in out, step
    results = out.split("== results", 1)[1]
    assert "reference" in results and "gtool 1x1x1" in results
    assert "pyg GCNConv" in results or "note: no PyG GCNConv row" in out
    assert f"{len(gpu.CUDA_TESTS)} skipped" in out, (
        "every CUDA test must be collected (and skipped without CUDA)"
    )
    assert "speed-up" in out.split("== shard", 1)[1], "the sweep's table"
    assert "profile-cpu.json:" in results and "  dropout: {" in results and "  epochs: {" in results


def test_unknown_steps_are_refused() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.gpu", "--steps", "train,fly"], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 2 and "unknown step(s) fly" in run.stderr
