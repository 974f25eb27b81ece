"""Fixed costs of the command line, this checkout against another (e.g. a worktree of main), side by side.

    git worktree add --detach /tmp/mainref main
    python -m bench.bench_fixed_costs --reference /tmp/mainref [--runs 5] [--work /tmp/fixed-costs]

Each case runs as a whole `python -m gtool.cli ...` process with PYTHONPATH on one checkout, then on the
other, in turn (A B A B ..., after one warm-up each, which also fills numba's cache of each checkout):
- help: `gtool --help`;
- shard: `gtool shard sbm:2000:4 --tiles 2x2`;
- train: `gtool train` of that store for 5 epochs on 1x1x1;
- demo: the README's `gtool train demo.zarr --grid 2x2x2 --epochs 20` (sbm:20000:4, 4x4 tiles); its
  overhead is the wall time less the sum of the epoch times it prints.
Prints min/median/max of each checkout and of the ratio this/reference, pair by pair (the machine's
speed drifts); writes bench/results/fixed_costs.json (by case, keeping the cases of earlier calls).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, RESULTS

EPOCH_TIME = re.compile(r"^epoch +\d+ .* time ([0-9.]+)s", re.M)


def cases(work: Path) -> dict[str, list[str]]:
    small, demo = str(work / "small.zarr"), str(work / "demo.zarr")
    return {
        "help": ["--help"],
        "shard": ["shard", "sbm:2000:4", "--tiles", "2x2", "-o", str(work / "shard.zarr"), "--overwrite"],
        "train": ["train", small, "--epochs", "5"],
        "demo": ["train", demo, "--grid", "2x2x2", "--epochs", "20"],
    }


def run(checkout: Path, args: list[str]) -> dict[str, float]:
    """One `gtool ARGS` on `checkout`: its wall time, and the wall less the epochs' times it printed."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gtool.cli", *args], env=env, capture_output=True, text=True, cwd=checkout
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: gtool {' '.join(args)} failed:\n{done.stderr}")
    epochs = sum(float(t) for t in EPOCH_TIME.findall(done.stdout + done.stderr))
    return {"wall": wall, "overhead": wall - epochs}


def spread(values: list[float]) -> str:
    return f"{min(values):7.2f} {statistics.median(values):7.2f} {max(values):7.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--reference", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/fixed-costs"))
    parser.add_argument("--cases", default="help,shard,train,demo")
    options = parser.parse_args()
    options.work.mkdir(parents=True, exist_ok=True)
    for name, source, tiles in (("small", "sbm:2000:4", "2x2"), ("demo", "sbm:20000:4", "4x4")):
        if not (options.work / f"{name}.zarr" / "zarr.json").exists():
            command = ["shard", source, "--tiles", tiles, "-o", str(options.work / f"{name}.zarr"), "-q"]
            run(REPO, command)
    checkouts = {"this": REPO, "reference": options.reference.resolve()}
    results: dict[str, dict] = {}
    print(f"{'case':8} {'figure':9} {'checkout':10} {'min':>7} {'median':>7} {'max':>7}")
    for case in options.cases.split(","):
        args = cases(options.work)[case]
        for checkout in checkouts.values():
            run(checkout, args)  # warm-up: page cache, numba's cache of this checkout
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
        for _ in range(options.runs):
            for name, checkout in checkouts.items():
                runs[name].append(run(checkout, args))
        figure = "overhead" if case == "demo" else "wall"
        ratios = [a[figure] / b[figure] for a, b in zip(runs["this"], runs["reference"], strict=True)]
        for name in checkouts:
            print(f"{case:8} {figure:9} {name:10} {spread([r[figure] for r in runs[name]])}")
        print(f"{case:8} {figure:9} {'ratio':10} {spread(ratios)}", flush=True)
        results[case] = {"figure": figure, **runs, "ratio": ratios}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "fixed_costs.json"
    earlier = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**earlier, **results}, indent=1))  # the cases of earlier calls are kept


if __name__ == "__main__":
    main()
