"""Sharding benchmark: gtool shard vs the in-memory approach, wall time and peak memory of the whole tree.

    python -m bench.bench_shard                      # rmat:20:8 16x16 (gtool and in-memory), rmat:24:8 at 2GB
    python -m bench.bench_shard --quick              # rmat:18:8 only
    python -m bench.bench_shard --workers 1,2,4,8,16 [--source rmat:21:16] [--memory-limit 8GB] [--rounds 3]
                                [--settle 70]
                                                     # parallel efficiency: per count the median wall,
                                                     # stage sum, fixed time outside the stages and each
                                                     # stage, peak, speed-ups; the counts take turns
    python -m bench.bench_shard --page-cache-cap 2.6GB [--feature-nodes 8000000] [--data DIR]   # as root
                                                     # features larger than the page cache allowed: the
                                                     # feature stage's time and disk bytes, cold, with
                                                     # and without a memory cgroup (bench/cgroup.py)

Peak memory, summed over the process tree, comes from ../shared/tools/peakmem, or where that is absent
from the same sampling in bench.common (TreePeak). Results: bench/results/.
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
import subprocess
import sys
import time
from pathlib import Path

from bench.cgroup import run_capped
from bench.common import REPO, RESULTS, measured

FEATURE_STAGES = ("route features", "assemble features", "permute features")


def measure(label: str, command: list[str]) -> dict:
    """A command's wall time and peak RSS, labelled."""
    figures, _ = measured(command)
    return {"label": label, **figures}


def store_of(spec: str) -> Path:
    return RESULTS / (Path(spec).name.replace(":", "-") + ".zarr")


def gtool_shard(
    spec: str, tiles: int, extra: list[str], settle: float = 0.0, report: Path | None = None
) -> list[str]:
    """`gtool shard SPEC` into a fresh output: the store of an earlier run is removed now, before the
    command is timed (as a user shards into a new location; --overwrite would time its removal too),
    and the file system left alone `settle` seconds after a sync. With `report`, run through
    bench.shard_report, which also writes the summary's figures there as JSON."""
    out = store_of(spec)
    shutil.rmtree(out, ignore_errors=True)
    if settle > 0:
        os.sync()
        time.sleep(settle)
    program = ["bench.shard_report", str(report)] if report else ["gtool.cli", "shard"]
    return [
        sys.executable,
        "-m",
        *program,
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


def timed_run(source: str, workers: int, extra: list[str], settle: float) -> dict:
    """One run of the sweep: wall time and peak of the command, and from its summary the seconds of each
    stage (the cluster's start and stop and the permutations among them), their sum and the rest of the
    wall time (the fixed cost outside the stages: start-up, imports, publishing, exiting)."""
    report = RESULTS / "sweep_report.json"
    report.unlink(missing_ok=True)
    command = gtool_shard(source, 16, ["--workers", str(workers), *extra], settle, report)
    run = measure(f"gtool {source} -w {workers}", command)
    stages = json.loads(report.read_text())["stage_seconds"]
    run["stage_seconds"] = stages
    run["stage_sum_s"] = sum(stages.values())
    run["fixed_s"] = run["wall_s"] - run["stage_sum_s"]
    return run


def compile_kernels() -> None:
    """Untimed: numba compiles the kernels into its on-disk cache the first time they run after an install,
    which would otherwise land on the first count timed alone (a machine that has sharded a large graph
    once has them compiled)."""
    print("untimed: gtool.preprocess.kernels.warm() (compiles numba's kernels once)", flush=True)
    warm = "from gtool.preprocess import kernels; kernels.warm()"
    subprocess.run([sys.executable, "-c", warm], check=True, cwd=REPO)


def sweep(source: str, counts: list[int], extra: list[str], rounds: int, settle: float) -> list[dict]:
    """`gtool shard SOURCE --tiles 16x16` at each worker count, `rounds` times with the counts taking
    turns (a slow spell of a shared machine then hits every count alike): per count the medians of the
    wall time, of the stage sum, of the fixed time outside the stages and of every stage, the largest
    peak, and the speed-up of the median wall over the first count's."""
    compile_kernels()
    runs: dict[int, list[dict]] = {w: [] for w in counts}
    for round_ in range(rounds):
        for w in counts:
            run = timed_run(source, w, extra, settle)
            runs[w].append(run)
            print(
                f"round {round_ + 1}: -w {w:<3d} {run['wall_s']:7.2f} s (stages {run['stage_sum_s']:.2f} s, "
                f"fixed {run['fixed_s']:.2f} s)  steal {run['steal_s']:5.2f} s",
                flush=True,
            )
    stage_names = list(dict.fromkeys(name for w in counts for r in runs[w] for name in r["stage_seconds"]))
    rows = []
    for w in counts:
        median = {
            key: statistics.median(r[key] for r in runs[w]) for key in ("wall_s", "stage_sum_s", "fixed_s")
        }
        stages = {s: statistics.median(r["stage_seconds"].get(s, 0.0) for r in runs[w]) for s in stage_names}
        peak = max(r["peak_rss_mb"] for r in runs[w])
        rows.append({"workers": w, **median, "stage_seconds": stages, "peak_rss_mb": peak, "runs": runs[w]})
    print_sweep(rows, stage_names)
    return rows


def print_sweep(rows: list[dict], stage_names: list[str]) -> None:
    """The sweep's table: medians per worker count, and the speed-up and efficiency of the wall time,
    of the stage sum and of every stage over the first count."""
    first = rows[0]
    shown = [s for s in stage_names if any(r["stage_seconds"][s] >= 0.05 for r in rows)]
    print(
        f"{'workers':>7s} {'wall s':>7s} {'runs s':>20s} {'stages s':>8s} {'fixed s':>7s} "
        + " ".join(f"{s[:8]:>8s}" for s in shown)
        + f" {'peak MB':>8s} {'speed-up':>8s} {'effic.':>6s} {'stages x':>8s}"
    )
    for r in rows:
        r["speedup"] = first["wall_s"] / r["wall_s"]
        r["stage_speedup"] = first["stage_sum_s"] / r["stage_sum_s"]
        r["stage_speedups"] = {
            s: first["stage_seconds"][s] / r["stage_seconds"][s] for s in shown if r["stage_seconds"][s] > 0
        }
        gain = r["speedup"] / (r["workers"] / first["workers"])
        walls = " ".join(f"{x['wall_s']:.1f}" for x in r["runs"])
        print(
            f"{r['workers']:7d} {r['wall_s']:7.2f} {walls:>20s} {r['stage_sum_s']:8.2f} {r['fixed_s']:7.2f} "
            + " ".join(f"{r['stage_seconds'][s]:8.2f}" for s in shown)
            + f" {r['peak_rss_mb']:8.0f} {r['speedup']:7.2f}x {gain:6.0%} {r['stage_speedup']:7.2f}x"
        )


def feature_inputs(folder: Path, nodes: int, features: int = 128) -> tuple[Path, Path]:
    """x.npy (nodes x features random float32, written a block at a time) and edges.npz (2 * nodes
    random edges), made once in `folder`."""
    import numpy as np

    x, edges = folder / f"x-{nodes}.npy", folder / f"edges-{nodes}.npz"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(18)
    if not x.exists():
        out = np.lib.format.open_memmap(x, mode="w+", dtype=np.float32, shape=(nodes, features))
        for start in range(0, nodes, 1 << 18):
            out[start : start + (1 << 18)] = rng.random((min(1 << 18, nodes - start), features), np.float32)
        out.flush()
        del out
    if not edges.exists():
        pairs = rng.integers(0, nodes, size=(2, 2 * nodes), dtype=np.int64)
        np.savez(edges, src=pairs[0], dst=pairs[1])
    return x, edges


def page_cache_case(cap: str, nodes: int, data: Path) -> list[dict]:
    """`gtool shard edges --features x.npy --tiles 4x4 --workers 1 --memory-limit 2GB`, caches dropped
    before each run, without and with a memory cgroup of `cap` (resident memory and page cache): total
    wall, the feature stages' busy seconds and disk bytes, the cgroup's peak."""
    from gtool.units import parse_bytes

    x, edges = feature_inputs(data, nodes)
    rows = []
    for label, limit in (("uncapped", None), (f"capped at {cap}", parse_bytes(cap))):
        report, out = RESULTS / "page_cache_report.json", store_of(str(edges))
        shutil.rmtree(out, ignore_errors=True)
        command = [
            sys.executable,
            "-m",
            "bench.shard_report",
            str(report),
            str(edges),
            "--num-nodes",
            str(nodes),
        ]
        command += ["--features", str(x), "--tiles", "4x4", "--workers", "1", "--memory-limit", "2GB"]
        figures = run_capped([*command, "-o", str(out), "--quiet"], limit, None)
        summary = json.loads(report.read_text())
        io = [summary["stage_io"][s] for s in FEATURE_STAGES if s in summary["stage_io"]]
        rows.append(
            {
                "run": label,
                **figures,
                "shard_s": summary["seconds"],
                "features_busy_s": sum(s["busy_s"] for s in io),
                "features_read_bytes": sum(s["read"] for s in io),
                "features_written_bytes": sum(s["written"] for s in io),
                "stage_seconds": summary["stage_seconds"],
            }
        )
        shutil.rmtree(out, ignore_errors=True)
    print(
        f"{'run':18s} {'wall s':>7s} {'features s':>11s} {'read GB':>8s} {'written GB':>11s} "
        f"{'cgroup MB':>10s}"
    )
    for r in rows:
        print(
            f"{r['run']:18s} {r['wall_s']:7.1f} {r['features_busy_s']:11.1f} "
            f"{r['features_read_bytes'] / 1e9:8.2f} {r['features_written_bytes'] / 1e9:11.2f} "
            f"{r.get('cgroup_peak_mb', float('nan')):10.0f}"
        )
    base, capped = rows
    print(
        f"capped / uncapped: features x{capped['features_busy_s'] / base['features_busy_s']:.2f}, "
        f"whole run x{capped['wall_s'] / base['wall_s']:.2f}"
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
    parser.add_argument("--page-cache-cap", help="run the feature case, capped at this size (e.g. 2.6GB)")
    parser.add_argument("--feature-nodes", type=int, default=8_000_000, help="rows of the feature case")
    parser.add_argument("--data", type=Path, default=RESULTS / "features-data", help="its input files")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.page_cache_cap:
        rows = page_cache_case(args.page_cache_cap, args.feature_nodes, args.data)
        (RESULTS / "bench_shard_page_cache.json").write_text(json.dumps(rows, indent=2))
        return
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
