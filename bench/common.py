"""What the benchmarks share: paths, building a store once, and running a command under peakmem."""

from __future__ import annotations

import json
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


def measured(command: list[str]) -> tuple[dict[str, float], str]:
    """Run `command` (under ../shared/tools/peakmem when present): its peak RSS (MB, summed over the
    process tree; NaN without peakmem), wall time and standard output."""
    with tempfile.NamedTemporaryFile(suffix=".json") as figures:
        wrapped = command
        if PEAKMEM.exists():
            wrapped = [sys.executable, str(PEAKMEM), "--json", figures.name, "--", *command]
        start = time.perf_counter()
        done = subprocess.run(wrapped, check=True, cwd=REPO, stdout=subprocess.PIPE, text=True)
        wall = time.perf_counter() - start
        peak = json.loads(Path(figures.name).read_text())["peak_rss_mb"] if PEAKMEM.exists() else float("nan")
    return {"peak_rss_mb": peak, "wall_s": wall}, done.stdout
