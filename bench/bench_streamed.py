"""One mini-batch epoch with the features in memory against the same epoch reading them from the store.

    python -m bench.bench_streamed STORE --batch-size 1000000 --layers 2 --hidden 32 --threads 2
    python -m bench.bench_streamed STORE --batch-size 4096 --runs store     # one of them only

Each run is `gtool train STORE --epochs 1 FLAGS --features-from memory|store --eval sampled` (the flags
given, the defaults otherwise; both evaluate the same sampled batches, so their work is the same), one
after the other, under ../shared/tools/peakmem where present (else the process tree sampled alike). The
table gives the epoch seconds, the loss, the feature bytes read from the store, the load seconds, the
peak RSS of the process tree, and the epoch-time ratio store / memory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from bench.common import measured

RUNS = ("memory", "store")


def train(store: str, flags: list[str], source: str) -> dict[str, float]:
    """`gtool train` of one epoch with `flags` and --features-from `source`: its figures."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "log.jsonl"
        command = [sys.executable, "-m", "gtool.cli", "train", store, "--epochs", "1", "--eval", "sampled"]
        command += [*flags, "--features-from", source, "--log", str(log)]
        figures, stdout = measured(command)
        epoch, summary = (json.loads(line) for line in log.read_text().splitlines())
    loaded = re.search(r"loaded in ([0-9.]+)s", stdout)
    return {
        "epoch_s": epoch["seconds"],
        "loss": epoch["loss"],
        "read_bytes": epoch["read_bytes"],
        "read_s": epoch["read_seconds"],
        "valid": epoch["accuracy"]["valid"],
        "load_s": float(loaded.group(1)) if loaded else float("nan"),
        "rank_rss_mb": max(rank["rss"] for rank in summary["summary"]["peak_memory_mb"]),
        **figures,
    }


def main(argv: list[str] | None = None) -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("store")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated of memory, store")
    args, flags = parser.parse_known_args(argv)
    print(f"{args.store}, one epoch: gtool train {' '.join(flags)}", flush=True)
    print("| features from | epoch s | loss | valid (sampled) | read | read s | load s | peak RSS MB |")
    print("|---" * 8 + "|")
    found = {}
    for source in args.runs.split(","):
        found[source] = run = train(args.store, flags, source)
        cells = [f"{run['epoch_s']:.2f}", f"{run['loss']:.6f}", f"{run['valid']:.4f}"]
        cells += [f"{run['read_bytes'] / 2**30:.2f} GiB", f"{run['read_s']:.2f}", f"{run['load_s']:.1f}"]
        print(f"| {source} | {' | '.join(cells)} | {run['peak_rss_mb']:.0f} |", flush=True)
    if len(found) == 2:
        ratio = found["store"]["epoch_s"] / found["memory"]["epoch_s"]
        print(f"epoch time store / memory: {ratio:.2f}")


if __name__ == "__main__":
    main()
