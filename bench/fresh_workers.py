"""`gtool shard --scheduler` against freshly started workers, round after round: does a worker ever die?

Each round starts a `dask scheduler` and `--workers` `dask worker` processes (each from a folder of its
own), runs one shard on them, and counts the workers that are gone or whose log holds a traceback (a
fresh worker once died for good in about one first run in six: an import raced the unpickling of a task).

    python -m bench.fresh_workers --rounds 20
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.external_cluster import ExternalCluster, environment

DEATH_SIGNS = ("Traceback", "partially initialized module", "Worker process died", "KilledWorker")


def one_round(root: Path, source: str, workers: int) -> tuple[bool, float, list[str]]:
    """(the shard exited 0, its seconds, what went wrong with the workers) for one fresh cluster."""
    cluster = ExternalCluster(root).start(workers)
    try:
        command = [sys.executable, "-m", "gtool.cli", "shard", source, "-o", str(root / "out.zarr")]
        started = time.perf_counter()
        result = subprocess.run(
            [*command, "--tiles", "4x4", "-q", "--scheduler", cluster.address],
            env=environment(),
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - started
        gone = [f"worker {k} ended" for k, p in enumerate(cluster.processes[1:]) if p.poll() is not None]
        logs = cluster.logs()
        signs = [sign for sign in DEATH_SIGNS if sign in logs]
        if result.returncode != 0:
            signs.append(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "exit status")
        return result.returncode == 0, seconds, gone + signs
    finally:
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--source", default="rmat:14:8")
    args = parser.parse_args()
    failures = 0
    for k in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="gtool-fresh-") as folder:
            ok, seconds, problems = one_round(Path(folder), args.source, args.workers)
        failures += bool(problems) or not ok
        told = "; ".join(problems) or "no worker died"
        print(f"round {k + 1}: exit {'0' if ok else 'non-zero'}, {seconds:.1f} s, {told}", flush=True)
    print(f"{args.rounds - failures} of {args.rounds} rounds without a worker death")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
