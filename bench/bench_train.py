"""Training benchmark: `gtool train` epoch time and peak memory against a plain PyTorch GCN, side by side.

    python -m bench.bench_train                   # rmat:20:8, hidden 128, 3 layers, dropout 0.5, 5 epochs
    python -m bench.bench_train --scale 16        # quick
    python -m bench.bench_train --grids 1x1x1,2x1x1,2x2x2 --epochs 8
    python -m bench.bench_train --device cuda --scale 22 --edge-factor 16     # one GPU: 1x1x1 NCCL
    python -m bench.bench_train --pyg             # adds a PyG GCNConv row (when torch_geometric imports)
    python -m bench.bench_train --batch-size 131072   # adds mini-batch rows: 1x1x1, 2x1x1, 2x(1x1x1)
    python -m bench.bench_train --layer-order aggregate-first   # gtool's (A F) W in every layer

The store (16x16 tiles, 128 features, 32 classes) is built once with gtool shard into
bench/results/train/. Every measurement runs in its own process (peak RSS of the whole process tree,
bench.common.measured), with the trainer's default dropout (0.5, `--dropout` to change) on both sides:
"reference" is a plain PyTorch GCN on the whole graph as a 1x1x1 rank loads it (trainer/serial.py's
SerialGCN with F.dropout masks: torch.sparse CSR products, torch.optim.Adam), "gtool AxBxC" is
`gtool train --grid AxBxC`. On the CPU every process runs one torch thread; with `--device cuda` the
reference runs on the GPU and gtool runs 1x1x1 with NCCL (default grids), and the table adds each
side's GPU peak (torch.cuda.max_memory_allocated). `--pyg` adds "pyg GCNConv": the same model, data,
dropout and optimizer with torch_geometric's GCNConv layers (normalize=False, no bias: the store's matrix
is already normalized) multiplying by the same sparse CSR matrices. Figures are medians over the epochs
after the first (warm-up): robust to a busy machine's hiccups.

`--batch-size B` adds mini-batch rows ("gtool mb LAYOUT", `gtool train --batch-size B`, layouts from
`--minibatch-layouts`, D replicas written Dx(GRID)) in a second table: the epoch time, the step time (an
epoch's time over its rounds of steps), the sampling share (the time steps waited for their cut, over
the epoch's time; cuts are prepared while the previous step trains), the cut share (the time the cuts
took, over the epoch's time: work beside the steps on the same cores, hidden or not) and the epoch time
against the full-graph epoch of the same grid.
"""

from __future__ import annotations

import argparse
import json
import re
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


def train_reference(store: str, args: argparse.Namespace, pyg: bool = False) -> dict:
    """The child side of "reference" (and of "pyg GCNConv"): time a plain PyTorch GCN's epochs on the
    whole graph."""
    import torch

    from gtool.loader import load_rank
    from gtool.trainer.config import TrainConfig
    from gtool.trainer.models.serial import SerialGCN, SerialGraph

    torch.set_num_threads(1)
    device = torch.device(args.device)
    config = TrainConfig.of(store, layers=args.layers, hidden=args.hidden, dropout=args.dropout)
    data = load_rank(store, grid=(1, 1, 1), rank=0, layers=args.layers)
    graph = SerialGraph.from_rank_data(data, torch.float32).to(device)
    del data
    if pyg:
        from bench.pyg_gcn import PygGCN

        model = PygGCN(graph, config)
    else:
        model = SerialGCN(graph, config, torch_dropout=True)
    times = []
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        model.train_epoch(epoch)
        times.append(time.perf_counter() - started)
    gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {"seconds": steady_median(times), "peak_gpu_mb": gpu}


def steady_median(values: list[float]) -> float:
    """Median over the epochs after the first."""
    return statistics.median(values[1:] if len(values) > 1 else values)


def model_flags(args: argparse.Namespace) -> list[str]:
    """The model and run shape both sides are given."""
    flags = ["--layers", str(args.layers), "--hidden", str(args.hidden), "--epochs", str(args.epochs)]
    return [*flags, "--dropout", str(args.dropout), "--device", args.device]


def run_reference(args: argparse.Namespace, store: str, pyg: bool = False) -> dict:
    """The reference GCN (or the PyG one) in a child process."""
    role = ["--pyg-child"] if pyg else []
    child = [sys.executable, "-m", "bench.bench_train", "--reference-child", store, *role, *model_flags(args)]
    peak, stdout = measured(child)
    mode = "pyg GCNConv" if pyg else "reference"
    return {"mode": mode, **peak, **json.loads(stdout.strip().splitlines()[-1])}


def pyg_missing() -> str | None:
    """Why the PyG row cannot run here, or None."""
    try:
        import torch_geometric.nn  # noqa: F401
    except ImportError as error:
        return f"torch_geometric does not import ({error})"
    return None


def replicated(layout: str) -> tuple[int, str]:
    """(D, GRID) of a layout written GRID or Dx(GRID)."""
    match = re.fullmatch(r"(\d+)x\((.+)\)", layout)
    return (int(match.group(1)), match.group(2)) if match else (1, layout)


def run_gtool(args: argparse.Namespace, store: str, layout: str, batch_size: int | None = None) -> dict:
    """`gtool train --grid GRID` (NCCL on CUDA), mini-batch with `batch_size`, its figures read from its
    --log lines and summary."""
    backend = "nccl" if args.device == "cuda" else "gloo"
    replicas, grid = replicated(layout)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--grid", grid, *model_flags(args)]
        command += ["--backend", backend, "--eval-every", str(args.epochs), "--log", str(log)]
        command += ["--layer-order", args.layer_order]
        if batch_size is not None:
            command += ["--batch-size", str(batch_size), "--data-parallel", str(replicas)]
        peak, _ = measured(command)
        lines = [json.loads(line) for line in log.read_text().splitlines()]
    epochs = [line for line in lines if "summary" not in line]
    ranks = lines[-1]["summary"]["peak_memory_mb"]
    gpu = max(rank["gpu"] for rank in ranks) if args.device == "cuda" else None
    mode = f"gtool {layout}" if batch_size is None else f"gtool mb {layout}"
    result = {"mode": mode, "grid": grid, **peak, "peak_gpu_mb": gpu}
    for figure in ("seconds", *PHASES):
        result[figure] = steady_median([epoch[figure] for epoch in epochs])
    if batch_size is not None:
        result["step_seconds"] = steady_median([e["seconds"] / len(e["step_losses"][0]) for e in epochs])
        result["sampling_share"] = steady_median([e["sample_wait"] / e["seconds"] for e in epochs])
        result["cut_share"] = steady_median([e["sample_cut"] / e["seconds"] for e in epochs])
    return result


def print_minibatch_table(rows: list[dict], args: argparse.Namespace) -> None:
    """The mini-batch rows: epoch and step time, sampling share, epoch time over the full-graph one."""
    full = {
        row["grid"]: row for row in rows if row["mode"].startswith("gtool ") and "step_seconds" not in row
    }
    print(f"\nmini-batch, --batch-size {args.batch_size}; median epoch after the first")
    header = ("mode", "epoch s", "step s", "sampling", "cuts", "vs full", "peak MB")
    print("{:20s} {:>9s} {:>9s} {:>9s} {:>9s} {:>9s} {:>9s}".format(*header))
    for row in rows:
        if "step_seconds" not in row:
            continue
        versus = (
            f"{row['seconds'] / full[row['grid']]['seconds']:9.2f}" if row["grid"] in full else f"{'-':>9s}"
        )
        print(
            f"{row['mode']:20s} {row['seconds']:9.3f} {row['step_seconds']:9.3f} "
            f"{row['sampling_share']:9.1%} {row['cut_share']:9.1%} {versus} {row['peak_rss_mb']:9.0f}"
        )


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    shape = f"{args.layers} layers, hidden {args.hidden}, dropout {args.dropout}, {args.epochs} epochs"
    print(f"\nrmat:{args.scale}:{args.edge_factor} on {args.device}, {shape}; median epoch after the first")
    header = ("mode", "epoch s", "spmm s", "dense s", "comm s", "peak MB", "GPU MB", "wall s")
    print("{:20s} {:>9s} {:>9s} {:>9s} {:>9s} {:>9s} {:>9s} {:>8s}".format(*header))
    for row in rows:
        phases = " ".join(f"{row[p]:9.3f}" if p in row else f"{'-':>9s}" for p in PHASES)
        gpu = f"{row['peak_gpu_mb']:9.0f}" if row.get("peak_gpu_mb") is not None else f"{'-':>9s}"
        print(
            f"{row['mode']:20s} {row['seconds']:9.3f} {phases} {row['peak_rss_mb']:9.0f} {gpu} "
            f"{row['wall_s']:8.1f}"
        )
    by_mode = {row["mode"]: row for row in rows}
    if "reference" in by_mode and "gtool 1x1x1" in by_mode:
        ours, reference = by_mode["gtool 1x1x1"], by_mode["reference"]
        time_target = 0.8 if args.device == "cuda" else 1.2
        memory, kind = ("peak_gpu_mb", "GPU") if args.device == "cuda" else ("peak_rss_mb", "RSS")
        print(f"gtool 1x1x1 / reference epoch time: {ours['seconds'] / reference['seconds']:.2f} ", end="")
        print(
            f"(target <= {time_target}); {kind} peak: {ours[memory] / reference[memory]:.2f} (target <= 0.8)"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--scale", type=int, default=20, help="R-MAT scale (2^SCALE nodes)")
    parser.add_argument("--edge-factor", type=int, default=8)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--dropout", type=float, default=0.5, help="dropout rate of both sides")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--grids", help="comma-separated grids (default 1x1x1,2x1x1,2x2x2; 1x1x1 on cuda; '' for none)"
    )
    parser.add_argument("--pyg", action="store_true", help="add a PyG GCNConv row (a note if PyG is absent)")
    parser.add_argument("--batch-size", type=int, help="add mini-batch rows with samples of this many nodes")
    parser.add_argument(
        "--minibatch-layouts",
        default="1x1x1,2x1x1,2x(1x1x1)",
        help="comma-separated layouts of the mini-batch rows: GRID or Dx(GRID) for D replicas",
    )
    parser.add_argument(
        "--layer-order",
        default="auto",
        choices=("auto", "aggregate-first", "transform-first"),
        help="gtool's --layer-order (the reference always aggregates first, as a plain GCN does)",
    )
    parser.add_argument("--no-reference", action="store_true", help="leave out the reference row")
    parser.add_argument("--reference-child", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--pyg-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.grids is None:
        args.grids = "1x1x1" if args.device == "cuda" else "1x1x1,2x1x1,2x2x2"
    return args


def build(args: argparse.Namespace) -> Path:
    """The benchmark's store for args.scale and args.edge_factor, sharded unless it is there."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = store_path(args.scale, args.edge_factor)
    options = ["--tiles", "16x16", "--num-features", "128", "--num-classes", "32"]
    build_store(store, f"rmat:{args.scale}:{args.edge_factor}", options)
    return store


def run(args: argparse.Namespace) -> list[dict]:
    """Every row of the benchmark, printed as a table and saved in RESULTS."""
    store = build(args)
    rows = [] if args.no_reference else [run_reference(args, str(store))]
    rows += [run_gtool(args, str(store), grid) for grid in args.grids.split(",") if grid]
    if args.batch_size is not None:
        layouts = args.minibatch_layouts.split(",")
        rows += [run_gtool(args, str(store), layout, args.batch_size) for layout in layouts]
    if args.pyg and (why := pyg_missing()):
        print(f"note: no PyG GCNConv row: {why}")
    elif args.pyg:
        rows.append(run_reference(args, str(store), pyg=True))
    print_table([row for row in rows if "step_seconds" not in row], args)
    if args.batch_size is not None:
        print_minibatch_table(rows, args)
    order = "" if args.layer_order == "auto" else f"-{args.layer_order}"
    summary = RESULTS / f"bench_train-rmat{args.scale}-{args.edge_factor}-{args.device}{order}.json"
    arguments = {k: v for k, v in vars(args).items() if k not in ("reference_child", "pyg_child")}
    summary.write_text(json.dumps({"args": arguments, "rows": rows}, indent=2))
    return rows


def main() -> None:
    args = parse_args()
    if args.reference_child:
        print(json.dumps(train_reference(args.reference_child, args, pyg=args.pyg_child)))
        return
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            sys.exit("bench_train --device cuda needs a CUDA GPU, and torch sees none")
    run(args)


if __name__ == "__main__":
    main()
