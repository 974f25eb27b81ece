"""Kernel threads under oversubscription: a small ScaleGNN epoch with numba's default threads against one.

    python -m bench.bench_threads                        # 2x2x1 (4 ranks), one busy process per core
    python -m bench.bench_threads --grid 1x1x1 --busy 0  # one rank, a quiet machine

On a machine with more runnable processes than cores, a thread pool whose threads spin or wait at barriers
for threads the scheduler parked makes every parallel pass (and torch's, where numba's pool launch had
raised torch's thread count) as slow as the scheduler's time slice. This starts --busy processes that spin
(`while True: pass`, default one per core), then trains ScaleGNN on sbm-multi:NODES:4:8 (built once into
bench/results/threads/) --repeats times each way, alternating: "one thread" with NUMBA_NUM_THREADS=1,
"default" with the environment as it is. Prints each side's median epoch (over the epochs after each run's
first, then over the runs) and the ratio default / one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_train import steady_median
from bench.common import RESULTS, build_store
from gtool.cores import available_cores

SIDES = {"one thread": {"NUMBA_NUM_THREADS": "1"}, "default": {}}
"""Each side's environment over this process's (NUMBA_NUM_THREADS left out)."""


def epoch_seconds(store: Path, args: argparse.Namespace, environment: dict[str, str]) -> float:
    """The median epoch after the first of one `gtool train --model scalegnn` run."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", str(store), "--model", "scalegnn"]
        command += ["--grid", args.grid, "--epochs", str(args.epochs), "--log", str(log), "--quiet"]
        base = {name: value for name, value in os.environ.items() if name != "NUMBA_NUM_THREADS"}
        subprocess.run(command, check=True, env={**base, **environment}, stdout=subprocess.DEVNULL)
        epochs = [json.loads(line) for line in log.read_text().splitlines()]
    return steady_median([epoch["seconds"] for epoch in epochs if "summary" not in epoch])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", default="2x2x1")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=available_cores(), help="spinning processes beside")
    args = parser.parse_args()
    store = RESULTS / "threads" / f"sbm-multi-{args.nodes}.zarr"
    build_store(store, f"sbm-multi:{args.nodes}:4:8", ["--tiles", "2x2"])
    epoch_seconds(store, args, SIDES["one thread"])  # numba's kernels compiled (or loaded) once, untimed
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        runs: dict[str, list[float]] = {side: [] for side in SIDES}
        for _ in range(args.repeats):
            for side, environment in SIDES.items():
                runs[side].append(epoch_seconds(store, args, environment))
    finally:
        for process in busy:
            process.kill()
            process.wait()
    medians = {side: statistics.median(seconds) for side, seconds in runs.items()}
    print(f"ScaleGNN sbm-multi:{args.nodes}:4:8, grid {args.grid}, {args.busy} busy process(es) on")
    print(f"{available_cores()} core(s); median epoch over {args.repeats} run(s) each:")
    for side, seconds in medians.items():
        print(f"  {side:11s} {seconds:.3f} s   (runs: {', '.join(f'{s:.3f}' for s in runs[side])})")
    print(f"default / one thread: {medians['default'] / medians['one thread']:.2f}x")


if __name__ == "__main__":
    main()
