"""Training benchmark: `gtool train` epoch time against a single-process torch.sparse GCN, side by side.

    python -m bench.bench_train                   # rmat:20:8, hidden 128, 3 layers, 5 epochs
    python -m bench.bench_train --scale 16        # quick
    python -m bench.bench_train --grids 1x1x1,2x1x1,2x2x2 --epochs 8

The store (16x16 tiles, 128 features, 32 classes) is built once with gtool shard into
bench/results/train/. Every measurement runs in its own process under ../shared/tools/peakmem (peak RSS
of the whole process tree) with one torch thread per process and no dropout:
"reference" is trainer/serial.py's SerialGCN on the whole graph as a 1x1x1 rank loads it (the same
matrices and operation order, torch.sparse CSR products, torch.optim.Adam), "gtool AxBxC" is
`gtool train --grid AxBxC`. Figures are medians over the epochs after the first (warm-up): robust to a
busy machine's hiccups.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS as BENCH_RESULTS
from bench.common import build_store, measured

RESULTS = BENCH_RESULTS / "train"
PHASES = ("spmm", "dense", "comm")


def store_path(scale: int, edge_factor: int) -> Path:
    return RESULTS / f"rmat-{scale}-{edge_factor}.zarr"


def train_reference(store: str, layers: int, hidden: int, epochs: int) -> dict:
    """The child side of "reference": time SerialGCN epochs on the whole graph."""
    import torch

    from gtool.loader import load_rank
    from gtool.trainer.config import TrainConfig
    from gtool.trainer.serial import SerialGCN, SerialGraph

    torch.set_num_threads(1)
    config = TrainConfig(store=store, layers=layers, hidden=hidden, dropout=0.0, epochs=epochs)
    graph = SerialGraph.from_rank_data(load_rank(store, grid=(1, 1, 1), rank=0, layers=layers), torch.float32)
    model = SerialGCN(graph, config)
    times = []
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        model.train_epoch(epoch)
        times.append(time.perf_counter() - started)
    return {"seconds": steady_median(times)}


def steady_median(values: list[float]) -> float:
    """Median over the epochs after the first."""
    return statistics.median(values[1:] if len(values) > 1 else values)


def run_reference(args: argparse.Namespace, store: str) -> dict:
    """The reference GCN in a child process."""
    child = [sys.executable, "-m", "bench.bench_train", "--reference-child", store]
    child += ["--layers", str(args.layers), "--hidden", str(args.hidden), "--epochs", str(args.epochs)]
    peak, stdout = measured(child)
    return {"mode": "reference", **peak, **json.loads(stdout.strip().splitlines()[-1])}


def run_gtool(args: argparse.Namespace, store: str, grid: str) -> dict:
    """`gtool train --grid GRID`, its figures read from its --log summary."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid]
        command += ["--layers", str(args.layers), "--hidden", str(args.hidden), "--epochs", str(args.epochs)]
        command += ["--eval-every", str(args.epochs), "--dropout", "0", "--log", str(log)]
        peak, _ = measured(command)
        result = {"mode": f"gtool {grid}", **peak}
        epochs = [json.loads(line) for line in log.read_text().splitlines() if '"summary"' not in line]
    for figure in ("seconds", *PHASES):
        result[figure] = steady_median([epoch[figure] for epoch in epochs])
    return result


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    shape = f"{args.layers} layers, hidden {args.hidden}, {args.epochs} epochs"
    print(f"\nrmat:{args.scale}:{args.edge_factor}, {shape}; median epoch after the first")
    header = ("mode", "epoch s", "spmm s", "dense s", "comm s", "peak MB", "wall s")
    print("{:14s} {:>9s} {:>9s} {:>9s} {:>9s} {:>9s} {:>8s}".format(*header))
    for row in rows:
        phases = " ".join(f"{row[p]:9.3f}" if p in row else f"{'-':>9s}" for p in PHASES)
        print(
            f"{row['mode']:14s} {row['seconds']:9.3f} {phases} {row['peak_rss_mb']:9.0f} {row['wall_s']:8.1f}"
        )
    by_mode = {row["mode"]: row for row in rows}
    if "reference" in by_mode and "gtool 1x1x1" in by_mode:
        ratio = by_mode["gtool 1x1x1"]["seconds"] / by_mode["reference"]["seconds"]
        print(f"gtool 1x1x1 / reference epoch time: {ratio:.2f} (target <= 1.2)")


def parse_args() -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--scale", type=int, default=20, help="R-MAT scale (2^SCALE nodes)")
    parser.add_argument("--edge-factor", type=int, default=8)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--grids", default="1x1x1,2x1x1,2x2x2", help="comma-separated grids to run")
    parser.add_argument("--reference-child", metavar="STORE", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.reference_child:
        print(json.dumps(train_reference(args.reference_child, args.layers, args.hidden, args.epochs)))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = store_path(args.scale, args.edge_factor)
    options = ["--tiles", "16x16", "--num-features", "128", "--num-classes", "32"]
    build_store(store, f"rmat:{args.scale}:{args.edge_factor}", options)
    rows = [run_reference(args, str(store))]
    rows += [run_gtool(args, str(store), grid) for grid in args.grids.split(",")]
    print_table(rows, args)
    summary = RESULTS / f"bench_train-rmat{args.scale}-{args.edge_factor}.json"
    arguments = {k: v for k, v in vars(args).items() if k != "reference_child"}
    summary.write_text(json.dumps({"args": arguments, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
