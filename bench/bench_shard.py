"""Sharding benchmark: gtool shard vs the in-memory approach, wall time and peak memory of the whole tree.

    python -m bench.bench_shard                      # rmat:20:8 16x16 (gtool and in-memory), rmat:24:8 at 2GB
    python -m bench.bench_shard --quick              # rmat:18:8 only
    python -m bench.bench_shard --workers 1,2,4,8,16 [--source rmat:21:16] [--memory-limit 8GB] [--rounds 3]
                                [--settle 70]
                                                     # parallel efficiency: median wall, peak, speed-up per
                                                     # count; the counts take turns, round after round

Peak memory comes from ../shared/tools/peakmem (summed over the process tree). Results: bench/results/.
`--settle S` syncs and waits S seconds between removing a run's old store and timing the run: ext4
without a journal (this project's VMs) makes files slowly for a minute or more after many were deleted
(the inode allocator steps over every recently freed inode), which would otherwise land on the timed run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.common import RESULTS, measured


def measure(label: str, command: list[str]) -> dict:
    """A command's wall time and peak RSS, labelled."""
    figures, _ = measured(command)
    return {"label": label, **figures}


def store_of(spec: str) -> Path:
    return RESULTS / (Path(spec).name.replace(":", "-") + ".zarr")


def gtool_shard(spec: str, tiles: int, extra: list[str], settle: float = 0.0) -> list[str]:
    """`gtool shard SPEC` into a fresh output: the store of an earlier run is removed now, before the
    command is timed (as a user shards into a new location; --overwrite would time its removal too),
    and the file system left alone `settle` seconds after a sync."""
    out = store_of(spec)
    shutil.rmtree(out, ignore_errors=True)
    if settle > 0:
        os.sync()
        time.sleep(settle)
    return [
        sys.executable,
        "-m",
        "gtool.cli",
        "shard",
        spec,
        "--tiles",
        f"{tiles}x{tiles}",
        "-o",
        str(out),
        "--quiet",
        *extra,
    ]


def nonzeros(spec: str) -> int:
    from gtool.store.reader import open_store

    return int(open_store(str(store_of(spec))).meta.nnz[0])


def sweep(source: str, counts: list[int], extra: list[str], rounds: int, settle: float) -> list[dict]:
    """`gtool shard SOURCE --tiles 16x16` at each worker count, `rounds` times with the counts taking
    turns (a slow spell of a shared machine then hits every count alike): the median wall per count,
    the largest peak, and the speed-up of the medians over the first count."""
    runs: dict[int, list[dict]] = {w: [] for w in counts}
    for round_ in range(rounds):
        for w in counts:
            command = gtool_shard(source, 16, ["--workers", str(w), *extra], settle)
            run = measure(f"gtool {source} -w {w}", command)
            runs[w].append(run)
            print(
                f"round {round_ + 1}: -w {w:<3d} {run['wall_s']:7.2f} s  steal {run['steal_s']:5.2f} s",
                flush=True,
            )
    rows = [
        {
            "workers": w,
            "wall_s": statistics.median(r["wall_s"] for r in runs[w]),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs[w]),
            "runs": runs[w],
        }
        for w in counts
    ]
    first = rows[0]
    print(f"{'workers':>7s} {'median s':>9s} {'runs s':>24s} {'peak MB':>8s} {'speed-up':>9s} {'effic.':>7s}")
    for r in rows:
        r["speedup"] = first["wall_s"] / r["wall_s"]
        gain = r["speedup"] / (r["workers"] / first["workers"])
        walls = " ".join(f"{x['wall_s']:.1f}" for x in r["runs"])
        print(
            f"{r['workers']:7d} {r['wall_s']:9.2f} {walls:>24s} {r['peak_rss_mb']:8.0f} "
            f"{r['speedup']:8.2f}x {gain:6.0%}"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="rmat:18:8 only")
    parser.add_argument("--no-baseline", action="store_true", help="skip the in-memory approach")
    parser.add_argument("--no-large", action="store_true", help="skip rmat:24:8")
    parser.add_argument("--workers", help="comma-separated worker counts to sweep (e.g. 1,2,4,8,16)")
    parser.add_argument("--source", default="rmat:20:8", help="what the --workers sweep shards")
    parser.add_argument("--memory-limit", help="--memory-limit of every run of the sweep")
    parser.add_argument("--rounds", type=int, default=3, help="runs per worker count in the sweep")
    parser.add_argument("--settle", type=float, default=0.0, help="seconds to wait after removing a store")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.workers:
        extra = ["--memory-limit", args.memory_limit] if args.memory_limit else []
        counts = [int(w) for w in args.workers.split(",")]
        rows = sweep(args.source, counts, extra, args.rounds, args.settle)
        (RESULTS / "bench_shard_workers.json").write_text(json.dumps(rows, indent=2))
        for zarr_dir in RESULTS.glob("*.zarr"):
            shutil.rmtree(zarr_dir)
        return
    small = "rmat:18:8" if args.quick else "rmat:20:8"
    rows = [measure(f"gtool {small}", gtool_shard(small, 16, [], args.settle))]
    rows[-1]["nnz"] = nonzeros(small)
    if not args.no_baseline:
        rows.append(
            measure(f"in-memory {small}", [sys.executable, "-m", "bench.inmemory_shard", small, "16"])
        )
        rows[-1]["nnz"] = rows[0]["nnz"]
    if not (args.quick or args.no_large):
        large = gtool_shard("rmat:24:8", 16, ["--memory-limit", "2GB"], args.settle)
        rows.append(measure("gtool rmat:24:8 2GB", large))
        rows[-1]["nnz"] = nonzeros("rmat:24:8")
    print(f"{'run':28s} {'wall s':>8s} {'peak MB':>9s} {'nnz':>13s} {'ns/nnz':>8s}")
    for r in rows:
        per = 1e9 * r["wall_s"] / r["nnz"]
        r["ns_per_nnz"] = per
        print(f"{r['label']:28s} {r['wall_s']:8.1f} {r['peak_rss_mb']:9.0f} {r['nnz']:13,d} {per:8.0f}")
    base = rows[0]
    for r in rows[1:]:
        print(
            f"{r['label']} / {base['label']}: time x{r['wall_s'] / base['wall_s']:.2f}, "
            f"peak x{r['peak_rss_mb'] / base['peak_rss_mb']:.2f}, "
            f"time/nnz x{r['ns_per_nnz'] / base['ns_per_nnz']:.2f}"
        )
    (RESULTS / "bench_shard.json").write_text(json.dumps(rows, indent=2))
    for zarr_dir in RESULTS.glob("*.zarr"):
        shutil.rmtree(zarr_dir)


if __name__ == "__main__":
    main()
