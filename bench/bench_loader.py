"""Loader benchmark: one rank's load_rank vs reading the whole graph, time and peak memory side by side.

    python -m bench.bench_loader                     # rmat:22 16x16 store, grid 2x2x2, rank 1, 3 layers
    python -m bench.bench_loader --scale 18          # quick
    python -m bench.bench_loader --grid 4x4x4 --rank 21

The store is built once (gtool shard) into bench/results/loader/ if missing. Each measurement runs in its
own process, its peak RSS summed over its process tree (bench.common.measured): "imports" loads nothing (the
interpreter, torch, zarr), "rank" is load_rank, "whole" reads every tile of every stored matrix into one
scipy CSR per matrix plus all node arrays, as a loader without per-rank sharding would.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import RESULTS as BENCH_RESULTS
from bench.common import build_store, measured

RESULTS = BENCH_RESULTS / "loader"
MODES = ("imports", "rank", "whole")


def store_path(scale: int, edge_factor: int, tiles: int) -> Path:
    return RESULTS / f"rmat-{scale}-{edge_factor}-{tiles}x{tiles}.zarr"


def load_one_rank(store: str, grid: tuple[int, int, int], rank: int, layers: int) -> dict:
    """load_rank, and what it returned."""
    from gtool.loader import load_rank

    data = load_rank(store, grid, rank, layers)
    tensors = [t for s in data.shards.values() for t in (s.matrix, s.transpose)]
    returned = sum(t.crow_indices().nbytes + t.col_indices().nbytes + t.values().nbytes for t in tensors)
    returned += data.features.nbytes + data.labels.nbytes + data.split.nbytes
    return {
        "seconds": data.read.seconds,
        "returned_mb": returned / 2**20,
        "tiles": data.read.tiles,
        "nnz": sum(s.nnz for s in data.shards.values()),
        "shards": len(data.shards),
    }


def load_whole_graph(store: str, workers: int = 8) -> dict:
    """Every tile of every stored matrix into one scipy CSR each, and all node arrays."""
    import numpy as np
    import scipy.sparse as sp

    from gtool.store import layout
    from gtool.store.reader import open_store

    started = time.perf_counter()
    opened = open_store(store)
    n, size, t = opened.num_nodes, opened.tile_size, opened.tiles
    returned, tiles, nnz = 0, 0, 0
    matrices = []
    for m in opened.matrices:
        coords = [(i, j) for i in range(t) for j in range(t)]
        with ThreadPoolExecutor(workers) as executor:
            parts = list(executor.map(lambda ij, m=m: opened.read_tile(m, *ij), coords))
        rows = np.concatenate(
            [p.row.astype(np.int64) + i * size for (i, _), p in zip(coords, parts, strict=True)]
        )
        cols = np.concatenate(
            [p.col.astype(np.int64) + j * size for (_, j), p in zip(coords, parts, strict=True)]
        )
        values = np.concatenate([p.val for p in parts])
        del parts
        matrix = sp.csr_matrix((values, (rows, cols)), shape=(n, n))
        del rows, cols, values
        matrices.append(matrix)
        returned += matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes
        tiles, nnz = tiles + len(coords), nnz + matrix.nnz
    arrays = [opened.array(layout.FEATURES)[:]]
    arrays += [
        opened.array(p)[:] for order in ("r", "c") for p in (layout.LABELS[order], layout.SPLIT[order])
    ]
    returned += sum(a.nbytes for a in arrays)
    return {
        "seconds": time.perf_counter() - started,
        "returned_mb": returned / 2**20,
        "tiles": tiles,
        "nnz": nnz,
        "shards": len(matrices),
    }


def measure_in_process(args: argparse.Namespace) -> None:
    """The child side: one mode, its figures as one JSON line on stdout."""
    import torch  # noqa: F401 - the imports every mode pays
    import zarr  # noqa: F401

    import gtool.loader  # noqa: F401

    store = str(store_path(args.scale, args.edge_factor, args.tiles))
    if args.measure == "rank":
        figures = load_one_rank(store, args.grid, args.rank, args.layers)
    elif args.measure == "whole":
        figures = load_whole_graph(store)
    else:
        figures = {"seconds": 0.0, "returned_mb": 0.0, "tiles": 0, "nnz": 0, "shards": 0}
    print(json.dumps(figures))


def run_measured(mode: str, args: argparse.Namespace) -> dict:
    """Run one mode in a child process (bench.common.measured); its figures plus peak RSS and wall time."""
    child = [sys.executable, "-m", "bench.bench_loader", "--measure", mode, "--scale", str(args.scale)]
    child += ["--edge-factor", str(args.edge_factor), "--tiles", str(args.tiles)]
    child += ["--grid", "x".join(map(str, args.grid)), "--rank", str(args.rank), "--layers", str(args.layers)]
    peak, stdout = measured(child)
    return {"mode": mode, **json.loads(stdout.strip().splitlines()[-1]), **peak}


def print_table(rows: dict[str, dict], args: argparse.Namespace) -> None:
    grid, tiles = "x".join(map(str, args.grid)), f"{args.tiles}x{args.tiles}"
    print(f"\nrmat:{args.scale}:{args.edge_factor} {tiles}, grid {grid}, rank {args.rank}, L={args.layers}")
    header = ("mode", "load s", "wall s", "peak MB", "returned MB", "tiles", "nnz")
    print("{:8s} {:>8s} {:>8s} {:>9s} {:>12s} {:>6s} {:>13s}".format(*header))
    for r in rows.values():
        print(
            f"{r['mode']:8s} {r['seconds']:8.2f} {r['wall_s']:8.2f} {r['peak_rss_mb']:9.0f} "
            f"{r['returned_mb']:12.0f} {r['tiles']:6d} {r['nnz']:13,d}"
        )
    rank, whole, base = rows["rank"], rows["whole"], rows["imports"]["peak_rss_mb"]
    print(
        f"whole / rank: load time x{whole['seconds'] / rank['seconds']:.1f}, "
        f"peak RSS x{whole['peak_rss_mb'] / rank['peak_rss_mb']:.1f}, "
        f"peak above imports x{(whole['peak_rss_mb'] - base) / (rank['peak_rss_mb'] - base):.1f}"
    )
    print(f"rank: (peak - imports) / returned = {(rank['peak_rss_mb'] - base) / rank['returned_mb']:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=int, default=22, help="R-MAT scale (2^SCALE nodes)")
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--tiles", type=int, default=16, help="T of the T x T store")
    parser.add_argument("--num-features", type=int, default=128, help="features of a newly built store")
    parser.add_argument("--grid", type=lambda s: tuple(int(v) for v in s.split("x")), default=(2, 2, 2))
    parser.add_argument("--rank", type=int, default=1, help="rank 1 of 2x2x2 holds 3 distinct shards at L=3")
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--measure", choices=MODES, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.measure:
        measure_in_process(args)
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    options = ["--tiles", f"{args.tiles}x{args.tiles}", "--num-features", str(args.num_features)]
    build_store(
        store_path(args.scale, args.edge_factor, args.tiles), f"rmat:{args.scale}:{args.edge_factor}", options
    )
    rows = {mode: run_measured(mode, args) for mode in MODES}
    print_table(rows, args)
    summary = RESULTS / f"bench_loader-rmat{args.scale}-{'x'.join(map(str, args.grid))}-r{args.rank}.json"
    summary.write_text(
        json.dumps({"args": {k: v for k, v in vars(args).items() if k != "measure"}, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
