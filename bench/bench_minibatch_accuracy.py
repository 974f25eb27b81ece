"""Mini-batch accuracy against full-graph training on the same store: test accuracy at the best validation
epoch (what `gtool train` reports), over several seeds, mean and spread.

    python -m bench.bench_minibatch_accuracy                       # sbm:20000:4, B = 2000, seeds 0-2
    python -m bench.bench_minibatch_accuracy --seeds 0,1,2,3,4 --runs full,minibatch-tuned
    python -m bench.bench_minibatch_accuracy --tuned "--dropout 0 --lr 0.003 --epochs 200"

Runs (1x1x1, one thread; the model's defaults otherwise: 3 layers, hidden 128):
  full               full-graph epochs with the defaults (dropout 0.5, lr 0.01, 100 epochs)
  full-tuned         full-graph epochs with the tuned flags (default --dropout 0 --lr 0.001 --epochs 300)
  minibatch          --batch-size B with the defaults
  minibatch-tuned    --batch-size B with the tuned flags (docs/train.md says why they suit it)

The store is built once with gtool shard into bench/results/minibatch/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import REPO, RESULTS, build_store

TUNED = "--dropout 0 --lr 0.001 --epochs 300"
RUNS = ("full", "full-tuned", "minibatch", "minibatch-tuned")


def run_flags(run: str, batch_size: int, tuned: str) -> list[str]:
    """The flags of `run`: --batch-size B for the mini-batch runs, the tuned flags for the tuned ones."""
    flags = ["--batch-size", str(batch_size)] if run.startswith("minibatch") else []
    return flags + (tuned.split() if run.endswith("-tuned") else [])


def accuracy_at_best_valid(store: Path, flags: list[str], seed: int) -> float:
    """`gtool train` on 1x1x1 with `flags`: the test accuracy at the best validation epoch."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", str(store), "--seed", str(seed), *flags]
        command += ["--threads", "1", "--log", str(log)]
        subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        summary = json.loads(log.read_text().splitlines()[-1])["summary"]
    return float(summary["test_at_best_valid"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--source", default="sbm:20000:4", help="graph to shard (gtool shard SOURCE)")
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated runs of {', '.join(RUNS)}")
    parser.add_argument("--tuned", default=TUNED, help="the flags of the tuned runs")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    store = RESULTS / "minibatch" / f"{args.source.replace(':', '-')}.zarr"
    store.parent.mkdir(parents=True, exist_ok=True)
    build_store(store, args.source, [])
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(f"{args.source}, --batch-size {args.batch_size}: test accuracy at the best validation epoch (%)")
    rows = []
    for run in args.runs.split(","):
        flags = run_flags(run, args.batch_size, args.tuned)
        accuracies = [100 * accuracy_at_best_valid(store, flags, seed) for seed in seeds]
        mean, spread = statistics.fmean(accuracies), max(accuracies) - min(accuracies)
        rows.append({"run": run, "flags": flags, "seeds": seeds, "accuracy": accuracies})
        each = "/".join(f"{value:.2f}" for value in accuracies)
        print(f"{run:16s} mean {mean:6.2f}  spread {spread:5.2f}  ({each})  {' '.join(flags)}", flush=True)
    summary = RESULTS / f"bench_minibatch_accuracy-{args.source.replace(':', '-')}-{args.batch_size}.json"
    summary.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
