"""Windowed mini-batch sampling (the default) against uniform node samples: the same accuracy, over seeds.

    python -m bench.bench_sampling                      # Cora (B 256) and sbm:20000:4 (B 2000), seeds 0-4
    python -m bench.bench_sampling --only sbm --seeds 0,1

Each run is `gtool train --batch-size B --sampling windows|uniform` on 1x1x1 (one thread, the model's
defaults otherwise, --epochs E); its figure is the test accuracy at the best validation epoch. The table
gives mean ± standard deviation (%) per sampling and of their difference per seed (same seed: same
initial weights). Stores are sharded once into bench/results/sampling/; Cora is never downloaded.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.bench_accuracy import CORA_FILES, DEFAULT_ROOT
from bench.bench_minibatch_accuracy import accuracy_at_best_valid
from bench.common import RESULTS, build_store

SAMPLINGS = ("windows", "uniform")
GRAPHS = {  # name: (gtool shard source, its options, batch size, epochs)
    "cora": ("cora", ["--tiles", "1x1"], 256, 100),
    "sbm": ("sbm:20000:4", [], 2000, 30),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="holds planetoid/cora")
    parser.add_argument("--only", default=",".join(GRAPHS), help=f"comma-separated of {', '.join(GRAPHS)}")
    parser.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    parser.add_argument("--epochs", type=int, default=None, help="epochs of every run (default: per graph)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"test accuracy at the best validation epoch (%), mean ± std over seeds {args.seeds}")
    print("| graph | B | epochs | windows | uniform | windows - uniform |")
    print("|---" * 6 + "|")
    for name in args.only.split(","):
        source, options, batch, epochs = GRAPHS[name]
        if name == "cora":
            if any(not (args.root / "planetoid" / "cora" / f).exists() for f in CORA_FILES):
                print(f"| cora | skipped: not in {args.root / 'planetoid' / 'cora'} |")
                continue
            options = [*options, "--root", str(args.root)]
        store = RESULTS / "sampling" / f"{name}.zarr"
        store.parent.mkdir(parents=True, exist_ok=True)
        build_store(store, source, options)
        epochs = args.epochs or epochs
        flags = ["--batch-size", str(batch), "--epochs", str(epochs), "-q"]
        found = {
            sampling: [
                100 * accuracy_at_best_valid(store, [*flags, "--sampling", sampling], s) for s in seeds
            ]
            for sampling in SAMPLINGS
        }
        shown = [f"{statistics.fmean(v):.2f} ± {statistics.pstdev(v):.2f}" for v in found.values()]
        gaps = [w - u for w, u in zip(found["windows"], found["uniform"], strict=True)]
        gap = f"{statistics.fmean(gaps):+.2f} ± {statistics.pstdev(gaps):.2f}"
        print(f"| {name} | {batch} | {epochs} | {shown[0]} | {shown[1]} | {gap} |", flush=True)


if __name__ == "__main__":
    main()
