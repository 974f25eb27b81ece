"""Extraction benchmark: the deflated members of an OGB binary dataset (papers100M layout), extracted on one
core and on all cores into a fresh cache, then a second run that finds them in the cache.

    python -m bench.bench_extract --data /big/disk/extract-bench            # 1M nodes x 128 features
    python -m bench.bench_extract --data DIR --nodes 4000000 --edges 64000000 [--drop-caches] [--keep]

The dataset (raw/data.npz with edge_index and node_feat, raw/node-label.npz, written with
np.savez_compressed as ogb writes them) is made once in DATA and reused. Each case runs in a process of
its own (`python -m bench.bench_extract --prepare`, the prepare step of `gtool shard`): the one-core case
is pinned to one CPU, so it extracts one member at a time. `--drop-caches` (root, Linux) empties the page
cache before each case, as on a machine where the input was written long ago. Results: bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import RESULTS


def make_dataset(folder: Path, nodes: int, features: int, edges: int) -> None:
    """A deflated papers100M-layout dataset of random data (normal features, uniform edges), once."""
    if (folder / "split" / "time" / "test.csv.gz").exists():
        return
    print(f"making {folder} ({nodes:,} nodes x {features}, {edges:,} edges) ...", flush=True)
    rng = np.random.default_rng(0)
    (folder / "raw").mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        folder / "raw" / "data.npz",
        edge_index=rng.integers(0, nodes, (2, edges), dtype=np.int64),
        node_feat=rng.standard_normal((nodes, features), dtype=np.float32),
        num_nodes_list=np.array([nodes]),
        num_edges_list=np.array([edges]),
    )
    labels = rng.integers(0, 172, (nodes, 1)).astype(np.float32)
    np.savez_compressed(folder / "raw" / "node-label.npz", node_label=labels)
    order = rng.permutation(nodes)
    cuts = {
        "train": order[: nodes // 10],
        "valid": order[nodes // 10 : nodes // 5],
        "test": order[nodes // 5 :],
    }
    (folder / "split" / "time").mkdir(parents=True, exist_ok=True)
    for name, ids in cuts.items():
        frame = pd.DataFrame(np.sort(ids)[:, None])
        frame.to_csv(folder / "split" / "time" / f"{name}.csv.gz", header=False, index=False)


def prepare(dataset: str, cache: str) -> None:
    """The prepare step of `gtool shard DATASET --cache-dir CACHE`; prints what it did as JSON."""
    from gtool.preprocess.sources.cache.entries import cache_folder
    from gtool.preprocess.sources.cache.extraction import prepare_source
    from gtool.preprocess.sources.ogb.source import open_ogb

    start = time.perf_counter()
    source = open_ogb(dataset)
    done = prepare_source(source, cache_folder(cache, None), None, False)
    source.node_data()
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - start,
                "extract_s": done.extract_seconds,
                "extracted_bytes": done.extracted_bytes,
                "reused_bytes": done.reused_bytes,
            }
        )
    )


def case(label: str, dataset: Path, cache: Path, cores: int | None, drop: bool) -> dict:
    """One prepare run in a process of its own, on `cores` CPUs (None: all)."""
    if drop:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    command = [sys.executable, "-m", "bench.bench_extract", "--prepare", str(dataset), str(cache)]
    if cores is not None:
        command = [
            "taskset",
            "-c",
            ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:cores]),
            *command,
        ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures = {"label": label, **json.loads(out.strip().splitlines()[-1])}
    rate = figures["extracted_bytes"] / figures["extract_s"] / 1e6 if figures["extract_s"] else 0.0
    print(
        f"{label:<28} {figures['wall_s']:7.1f} s   extraction {figures['extract_s']:6.1f} s ({rate:.0f} MB/s)"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, help="Folder for the dataset and the caches (needs ~2x its size)."
    )
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--edges", type=int, default=16_000_000)
    parser.add_argument("--drop-caches", action="store_true", help="Empty the page cache before each case.")
    parser.add_argument("--keep", action="store_true", help="Keep the dataset and caches.")
    parser.add_argument("--prepare", nargs=2, metavar=("DATASET", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        prepare(*args.prepare)
        return
    if args.data is None:
        parser.error("--data DIR is required")
    dataset = args.data / "ogbn_papers100M"
    make_dataset(dataset, args.nodes, args.features, args.edges)
    caches = [args.data / "cache-1", args.data / "cache-all"]
    for cache in caches:
        shutil.rmtree(cache, ignore_errors=True)
    results = [
        case("one core, empty cache", dataset, caches[0], 1, args.drop_caches),
        case(
            f"{len(os.sched_getaffinity(0))} cores, empty cache", dataset, caches[1], None, args.drop_caches
        ),
        case("second run (cache hit)", dataset, caches[1], None, args.drop_caches),
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "extract.json").write_text(json.dumps(results, indent=1))
    if not args.keep:
        shutil.rmtree(args.data)


if __name__ == "__main__":
    main()
