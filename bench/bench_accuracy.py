"""gtool's ScaleGNN stack against an independent plain-PyTorch implementation, on Cora, over seeds.

    python -m bench.bench_accuracy                         # 2 and 8 GCN layers, seeds 0-4, 200 epochs
    python -m bench.bench_accuracy --layers 8 --seeds 0,1  # quicker
    python -m bench.bench_accuracy --root DIR              # Cora in DIR/planetoid/cora

Both train the issue's setting (hidden 64, dropout 0.5, lr 0.01, weight decay 5e-4, row-normalized
features, 200 full-graph epochs): gtool through `gtool train --model scalegnn` on a 1x1x1 grid of a Cora
store sharded here (bench/results/accuracy/), the reference (bench/scalegnn_reference.py) in this process
on the store's unpermuted graph with torch's dropout and Adam. Each run's figure is the test accuracy at
the first epoch of best validation accuracy (what gtool's summary reports); the table gives the mean and
standard deviation over the seeds. Cora is never downloaded: without its eight Planetoid files under
ROOT/planetoid/cora the bench says so and exits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from bench.common import REPO, RESULTS, build_store
from bench.scalegnn_reference import Graph, Hyper, train

DEFAULT_ROOT = REPO.parent / "shared" / "datasets"
CORA_FILES = [f"ind.cora.{part}" for part in ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")]
STORE = RESULTS / "accuracy" / "cora.zarr"


def gtool_accuracy(store: Path, hyper: Hyper, seed: int) -> float:
    """`gtool train --model scalegnn` with the run's settings: the test accuracy at the best validation."""
    values = {"layers": hyper.layers, "hidden": hyper.hidden, "dropout": hyper.dropout, "lr": hyper.lr}
    values.update({"weight-decay": hyper.weight_decay, "epochs": hyper.epochs})
    settings = [text for name, value in values.items() for text in (f"--{name}", str(value))]
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", str(store), "--model", "scalegnn", *settings]
        command += ["--normalize-features", "row", "--seed", str(seed), "--threads", "1", "-q"]
        subprocess.run([*command, "--log", str(log)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        summary = json.loads(log.read_text().splitlines()[-1])["summary"]
    return float(summary["test_at_best_valid"])


def spread(values: list[float]) -> str:
    """Mean and (population) standard deviation, in percent."""
    return f"{100 * statistics.fmean(values):.2f} ± {100 * statistics.pstdev(values):.2f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="holds planetoid/cora")
    parser.add_argument("--layers", default="2,8", help="comma-separated GCN layer counts")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--epochs", type=int, default=200)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    missing = [name for name in CORA_FILES if not (args.root / "planetoid" / "cora" / name).exists()]
    if missing:
        print(f"skipped: Cora is not in {args.root / 'planetoid' / 'cora'} (missing {', '.join(missing)})")
        return
    STORE.parent.mkdir(parents=True, exist_ok=True)
    build_store(STORE, "cora", ["--root", str(args.root), "--tiles", "1x1"])
    torch.set_num_threads(1)
    graph = Graph.of_store(str(STORE))
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"Cora, ScaleGNN, test accuracy at the best validation epoch (%), seeds {args.seeds}")
    print("| layers | gtool | reference | gtool - reference | gtool per seed | reference per seed |")
    print("|---" * 6 + "|")
    for layers in [int(count) for count in args.layers.split(",")]:
        hyper = Hyper(layers=layers, epochs=args.epochs)
        ours = [gtool_accuracy(STORE, hyper, seed) for seed in seeds]
        theirs = [train(graph, hyper, seed) for seed in seeds]
        gap = 100 * (statistics.fmean(ours) - statistics.fmean(theirs))
        each = ["/".join(f"{100 * value:.1f}" for value in values) for values in (ours, theirs)]
        row = f"| {layers} | {spread(ours)} | {spread(theirs)} | {gap:+.2f} | {each[0]} | {each[1]} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
