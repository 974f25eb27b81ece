"""What the benchmarks share: paths, building a store once, and running a command under peakmem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gtool.preprocess.engine.monitor import TreePeak

REPO = Path(__file__).resolve().parents[1]
PEAKMEM = REPO.parent / "shared" / "tools" / "peakmem"
RESULTS = REPO / "bench" / "results"
PEAK_INTERVAL = 0.05
"""Seconds between samples of a command's process tree where peakmem is absent (peakmem's default)."""


def build_store(path: Path, source: str, options: list[str]) -> None:
    """`gtool shard SOURCE -o PATH OPTIONS`, unless the store is already there."""
    if (path / "zarr.json").exists():
        return
    command = [sys.executable, "-m", "gtool.cli", "shard", source, "-o", str(path), *options]
    print(f"building {path.name} ...", flush=True)
    subprocess.run([*command, "--overwrite", "--quiet"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def steal_seconds() -> float:
    """CPU time the hypervisor took from this machine since boot, summed over its CPUs (Linux
    /proc/stat; NaN elsewhere). On a shared VM, runs with a large steal were slowed from outside."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(command: list[str]) -> tuple[dict[str, float], str]:
    """Run `command`: its peak RSS (MB, summed over the process tree: by ../shared/tools/peakmem where
    present, else sampled the same way by gtool.preprocess.engine.monitor.TreePeak), wall time, CPU steal
    during the run and standard output."""
    stolen, start = steal_seconds(), time.perf_counter()
    stdout, peak = under_peakmem(command) if PEAKMEM.exists() else sampled(command)
    wall, stolen = time.perf_counter() - start, steal_seconds() - stolen
    return {"peak_rss_mb": peak, "wall_s": wall, "steal_s": stolen}, stdout


def under_peakmem(command: list[str]) -> tuple[str, float]:
    """(standard output, peak MB) of `command` run under ../shared/tools/peakmem."""
    with tempfile.NamedTemporaryFile(suffix=".json") as figures:
        wrapped = [sys.executable, str(PEAKMEM), "--json", figures.name, "--", *command]
        done = subprocess.run(wrapped, check=True, cwd=REPO, stdout=subprocess.PIPE, text=True)
        return done.stdout, json.loads(Path(figures.name).read_text())["peak_rss_mb"]


def sampled(command: list[str]) -> tuple[str, float]:
    """(standard output, peak MB) of `command`, its whole process tree sampled every PEAK_INTERVAL s."""
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    with child, TreePeak(child.pid, interval=PEAK_INTERVAL, lookup=0) as tree:
        stdout, _ = child.communicate()
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, command, stdout)
    return stdout, tree.peak_rss_mb
