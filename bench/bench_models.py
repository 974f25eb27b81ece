"""The models side by side: the ScaleGNN stack against the vanilla GCN, as `gtool train` runs them.

    python -m bench.bench_models                       # rmat:20:8, 1x1x1 and 2x1x1, 5 epochs
    python -m bench.bench_models --scale 16 --epochs 4 # quick
    python -m bench.bench_models --accuracy            # time to a target accuracy on the README's demo

Epoch rows: each model's median epoch time after the first and the peak RSS of the whole run (process
tree, bench.common.measured), with the trainer's defaults (hidden 128, 3 GCN layers, dropout 0.5), and
the ScaleGNN stack's figures as a ratio of the GCN's on the same grid: what its input projection, norms,
residual reshards, biases and head cost. Accuracy rows (`--accuracy`): sbm:20000:4 (tiles 4x4) on the
README's grid, each model trained for `--accuracy-epochs` epochs; the training seconds (evaluation
excluded, as ScaleGNN counts) until the validation accuracy first reaches `--target`, and the test
accuracy at the best validation epoch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench.common import RESULTS as BENCH_RESULTS
from bench.common import build_store, measured

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


def epoch_rows(args: argparse.Namespace) -> list[str]:
    store = RESULTS / f"rmat-{args.scale}-8.zarr"
    build_store(
        store, f"rmat:{args.scale}:8", ["--tiles", "16x16", "--num-features", "128", "--num-classes", "32"]
    )
    rows = [
        "| grid | model | median epoch s | peak RSS MB | epoch vs gcn | memory vs gcn |",
        "|---" * 6 + "|",
    ]
    for grid in args.grids.split(","):
        base: tuple[float, float] | None = None
        for model in MODELS:
            epochs, figures = train(store, grid, model, args.epochs, ["--eval-every", str(args.epochs)])
            median = statistics.median(record["seconds"] for record in epochs[1:])
            peak = figures["peak_rss_mb"]
            base = base or (median, peak)
            ratios = f"{median / base[0]:.2f}x | {peak / base[1]:.2f}x"
            rows.append(f"| {grid} | {model} | {median:.3f} | {peak:,.0f} | {ratios} |")
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
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--grids", default="1x1x1,2x1x1")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--accuracy", action="store_true", help="time to a target accuracy on the demo graph")
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--accuracy-grid", default="2x2x2")
    parser.add_argument("--accuracy-epochs", type=int, default=40)
    args = parser.parse_args()
    rows = accuracy_rows(args) if args.accuracy else epoch_rows(args)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
