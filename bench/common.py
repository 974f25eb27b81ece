"""What the benchmarks share: paths, building a store once, and running a command under peakmem."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEAKMEM = REPO.parent / "shared" / "tools" / "peakmem"
RESULTS = REPO / "bench" / "results"


def build_store(path: Path, source: str, options: list[str]) -> None:
    """`gtool shard SOURCE -o PATH OPTIONS`, unless the store is already there."""
    if (path / "zarr.json").exists():
        return
    command = [sys.executable, "-m", "gtool.cli", "shard", source, "-o", str(path), *options]
    print(f"building {path.name} ...", flush=True)
    subprocess.run([*command, "--overwrite", "--quiet"], check=True, cwd=REPO)


def steal_seconds() -> float:
    """CPU time the hypervisor took from this machine since boot, summed over its CPUs (Linux
    /proc/stat; NaN elsewhere). On a shared VM, runs with a large steal were slowed from outside."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(command: list[str]) -> tuple[dict[str, float], str]:
    """Run `command` (under ../shared/tools/peakmem when present): its peak RSS (MB, summed over the
    process tree; NaN without peakmem), wall time, CPU steal during the run and standard output."""
    with tempfile.NamedTemporaryFile(suffix=".json") as figures:
        wrapped = command
        if PEAKMEM.exists():
            wrapped = [sys.executable, str(PEAKMEM), "--json", figures.name, "--", *command]
        stolen, start = steal_seconds(), time.perf_counter()
        done = subprocess.run(wrapped, check=True, cwd=REPO, stdout=subprocess.PIPE, text=True)
        wall, stolen = time.perf_counter() - start, steal_seconds() - stolen
        peak = json.loads(Path(figures.name).read_text())["peak_rss_mb"] if PEAKMEM.exists() else float("nan")
    return {"peak_rss_mb": peak, "wall_s": wall, "steal_s": stolen}, done.stdout
