"""The models side by side: the ScaleGNN stack against the vanilla GCN, as `gtool train` runs them.

    python -m bench.bench_models                       # rmat:18:16, 1x1x1 and 2x1x1, 5 epochs, 3 pairs
    python -m bench.bench_models --scale 16 --pairs 1  # quick
    python -m bench.bench_models --accuracy            # time to a target accuracy on the README's demo

Epoch rows (issue 46's case: rmat:SCALE:16, 128 features, 16 classes, 4x4 tiles, the trainer's defaults:
hidden 128, 3 GCN layers, dropout 0.5; `--threads` torch threads in all, split over the grid's ranks):
each model's median epoch time after the first, the ScaleGNN stack's as a ratio of the GCN's on the same
grid (the median over `--pairs` runs of the two in turn, so a shared machine's drift hits both alike),
the mean phases of its epochs and how far their sum strays from the epoch's wall time at worst (the
phases must add up), and the peak RSS of the whole run (process tree, bench.common.measured).
Accuracy rows (`--accuracy`): sbm:20000:4 (tiles 4x4) on the README's grid, each model trained for
`--accuracy-epochs` epochs; the training seconds (evaluation excluded, as ScaleGNN counts) until the
validation accuracy first reaches `--target`, and the test accuracy at the best validation epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import RESULTS as BENCH_RESULTS
from bench.common import build_store, measured
from gtool.geometry.grid import parse_dims
from gtool.trainer.comm.timing import PHASES

RESULTS = BENCH_RESULTS / "models"
MODELS = ("gcn", "scalegnn")


def train(store: Path, grid: str, model: str, epochs: int, extra: list[str]) -> tuple[list[dict], dict]:
    """`gtool train` of `model`: its epoch records (the --log lines) and the measured run."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", str(store), "--grid", grid]
        command += ["--epochs", str(epochs), "--model", model, "--log", str(log), *extra]
        figures, _ = measured(command)
        lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if "epoch" in line], figures


def phase_gap(epochs: list[dict]) -> float:
    """The largest |sum of the phases - wall| / wall over `epochs`."""
    return max(abs(sum(r[p] for p in PHASES) - r["seconds"]) / r["seconds"] for r in epochs)


def epoch_rows(args: argparse.Namespace) -> list[str]:
    store = RESULTS / f"rmat-{args.scale}-16.zarr"
    options = ["--tiles", "4x4", "--num-features", "128", "--num-classes", "16"]
    build_store(store, f"rmat:{args.scale}:16", options)
    rows = [
        "| grid | model | median epoch s | vs gcn (pairs) | "
        + " | ".join(PHASES)
        + " | phases vs wall | peak RSS MB |",
        "|---" * (6 + len(PHASES)) + "|",
    ]
    for grid in args.grids.split(","):
        threads = max(1, args.threads // math.prod(parse_dims(grid, 3, "--grids")))
        extra = ["--eval-every", str(args.epochs), "--threads", str(threads)]
        runs: dict[str, list[tuple[list[dict], dict]]] = {model: [] for model in MODELS}
        for _ in range(args.pairs):
            for model in MODELS:
                runs[model].append(train(store, grid, model, args.epochs, extra))
        medians = {m: [statistics.median(r["seconds"] for r in e[1:]) for e, _ in runs[m]] for m in MODELS}
        for model in MODELS:
            steady = [record for epochs, _ in runs[model] for record in epochs[1:]]
            ratio = statistics.median(a / b for a, b in zip(medians[model], medians["gcn"], strict=True))
            phases = " | ".join(f"{statistics.mean(r[p] for r in steady):.3f}" for p in PHASES)
            peak = max(figures["peak_rss_mb"] for _, figures in runs[model])
            rows.append(
                f"| {grid} | {model} | {statistics.median(medians[model]):.3f} | {ratio:.2f}x | {phases} | "
                f"within {phase_gap(steady):.1%} | {peak:,.0f} |"
            )
    return rows


def accuracy_rows(args: argparse.Namespace) -> list[str]:
    store = RESULTS / "demo.zarr"
    build_store(store, "sbm:20000:4", ["--tiles", "4x4"])
    rows = [
        f"| model | epochs | seconds to valid >= {args.target} | epoch reaching it | test at best valid |",
        "|---" * 5 + "|",
    ]
    for model in MODELS:
        epochs, _ = train(store, args.accuracy_grid, model, args.accuracy_epochs, [])
        elapsed, reached = 0.0, None
        for record in epochs:
            elapsed += record["seconds"]
            if record.get("accuracy") and record["accuracy"]["valid"] >= args.target:
                reached = (elapsed, record["epoch"])
                break
        best = max((r for r in epochs if r.get("accuracy")), key=lambda r: r["accuracy"]["valid"])
        seconds, epoch = ("not reached", "-") if reached is None else (f"{reached[0]:.2f}", str(reached[1]))
        rows.append(f"| {model} | {len(epochs)} | {seconds} | {epoch} | {best['accuracy']['test']:.4f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--grids", default="1x1x1,2x1x1")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=3, help="runs of each model, in turn")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of a run, over its ranks")
    parser.add_argument("--accuracy", action="store_true", help="time to a target accuracy on the demo graph")
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--accuracy-grid", default="2x2x2")
    parser.add_argument("--accuracy-epochs", type=int, default=40)
    args = parser.parse_args()
    rows = accuracy_rows(args) if args.accuracy else epoch_rows(args)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
