"""Stores written by this tree and by another gtool (an older commit) are byte-identical, file by file.

Shards a fixed list of sources (rmat, grid, sbm, an edge file with features, labels and splits, Cora)
with each gtool and compares the two stores' files: the same relative paths, the same bytes, apart from
the time of writing that the store's metadata records (`created_at`, compared as equal).

    git worktree add --detach ../old 7126564
    python3 -m venv --system-site-packages ../venv-old && ../venv-old/bin/pip install --no-deps -e ../old
    python -m bench.stores_unchanged --old-python ../venv-old/bin/python

Exits with status 1 when a store differs, listing its differing files. Cora is skipped when its files
are absent (--cora names its folder).
"""

from __future__ import annotations

import argparse
import filecmp
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.common import REPO

EDGE_FILE_NODES = 3000
CASES = {
    "rmat": ["rmat:12:8", "--tiles", "4x4"],
    "grid": ["grid:60x50", "--tiles", "3x3", "--perm", "single"],
    "sbm": ["sbm:3000:4", "--tiles", "4x4"],
    "edge-file": [
        "{work}/edges.txt",
        "--num-nodes",
        str(EDGE_FILE_NODES),
        "--features",
        "{work}/features.npy",
        "--labels",
        "{work}/labels.npy",
        "--split",
        "{work}/split.npy",
        "--tiles",
        "3x3",
        "--directed",
    ],
    "cora": ["{cora}", "--tiles", "4x4"],
}
"""Each case's `gtool shard` arguments ({work}: the folder of the inputs, {cora}: Cora's folder)."""
WRITING_TIME = re.compile(rb'"created_at": "[^"]*"')
"""The one part of a store that differs between two runs of the same gtool (in its root zarr.json)."""


def write_edge_file(work: Path, seed: int = 5) -> None:
    """A directed edge list (text, with a comment line) and its nodes' features, labels and splits."""
    rng = np.random.default_rng(seed)
    n = EDGE_FILE_NODES
    src, dst = rng.integers(0, n, 8 * n), rng.integers(0, n, 8 * n)
    lines = "".join(f"{s} {d}\n" for s, d in zip(src.tolist(), dst.tolist(), strict=True))
    (work / "edges.txt").write_text("# source target\n" + lines)
    np.save(work / "features.npy", rng.standard_normal((n, 12)).astype(np.float32))
    np.save(work / "labels.npy", rng.integers(0, 5, n))
    np.save(work / "split.npy", rng.choice(np.array(["train", "valid", "test"]), n))


def shard(python: str, arguments: list[str], store: Path, work: Path) -> None:
    """`gtool shard` run by `python` in `work` (not in a repository, whose gtool/ would come first)."""
    command = [python, "-m", "gtool.cli", "shard", *arguments, "-o", str(store), "--overwrite", "--quiet"]
    subprocess.run([*command, "--workers", "1"], check=True, cwd=work)


def differences(old: Path, new: Path) -> list[str]:
    """Files only one store has, and files whose bytes differ (relative paths)."""
    files = {
        side: {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
        for side, root in (("old", old), ("new", new))
    }
    problems = [
        f"only in the {side} store: {path}"
        for side in files
        for path in sorted(files[side] - files["new" if side == "old" else "old"])
    ]
    for path in sorted(files["old"] & files["new"]):
        if not same_bytes(old / path, new / path):
            problems.append(f"differs: {path}")
    return problems


def same_bytes(old: Path, new: Path) -> bool:
    """Whether two files hold the same bytes (for a zarr.json: apart from the writing time)."""
    if old.name != "zarr.json":
        return filecmp.cmp(old, new, shallow=False)
    untimed = [WRITING_TIME.sub(b'"created_at": ""', path.read_bytes()) for path in (old, new)]
    return untimed[0] == untimed[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--old-python", required=True, help="the Python of a virtualenv holding the older gtool"
    )
    parser.add_argument("--cora", default=str(REPO.parent / "shared" / "datasets" / "planetoid" / "cora"))
    parser.add_argument("--work", help="folder for the inputs and stores (default: a temporary one)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gtool-stores-") as scratch:
        work = Path(args.work or scratch).resolve()
        work.mkdir(parents=True, exist_ok=True)
        write_edge_file(work)
        failed = False
        for name in args.cases:
            if name == "cora" and not Path(args.cora).is_dir():
                print(f"{name:10s} skipped: no Cora files at {args.cora}")
                continue
            arguments = [a.format(work=work, cora=args.cora) for a in CASES[name]]
            stores = {side: work / f"{name}-{side}.zarr" for side in ("old", "new")}
            shard(args.old_python, arguments, stores["old"], work)
            shard(sys.executable, arguments, stores["new"], work)
            problems = differences(stores["old"], stores["new"])
            files = sum(1 for p in stores["new"].rglob("*") if p.is_file())
            size = sum(p.stat().st_size for p in stores["new"].rglob("*") if p.is_file())
            verdict = "byte-identical" if not problems else f"{len(problems)} differences"
            print(f"{name:10s} {files:5d} files {size:>10,d} bytes: {verdict}", flush=True)
            for problem in problems[:20]:
                print(f"    {problem}")
            failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
