"""Input formats benchmark: one R-MAT graph written as .npy, Matrix Market and scipy.sparse .npz (csr,
coo), each sharded with default flags; wall time and peak memory of the whole tree, ratios to .npy,
and the time of the Matrix Market entry-count pass alone.

    python -m bench.bench_formats                    # rmat:20:8
    python -m bench.bench_formats --scale 18         # quicker

Peak memory, summed over the process tree, comes from ../shared/tools/peakmem, or where that is absent
from the same sampling in bench.common (TreePeak). Results: bench/results/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from bench.common import RESULTS, measured
from gtool.preprocess.sources.generators import RmatSource
from gtool.preprocess.sources.text.file import count_data_lines
from gtool.preprocess.sources.text.mtx import MtxSource


def rmat_edges(scale: int, factor: int) -> tuple[np.ndarray, np.ndarray]:
    """The edges of rmat:SCALE:FACTOR."""
    blocks = [chunk.read() for chunk in RmatSource(scale, factor).edge_chunks(1 << 22)]
    return np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])


def write_inputs(folder: Path, scale: int, factor: int) -> dict[str, Path]:
    """The graph in every format measured, written once (kept for reruns at the same size)."""
    folder = folder / f"rmat-{scale}-{factor}"
    files = {name: folder / name for name in ("edges.npy", "edges.mtx", "csr.npz", "coo.npz")}
    if all(path.exists() for path in files.values()):
        return files
    src, dst = rmat_edges(scale, factor)
    n = 1 << scale
    folder.mkdir(parents=True, exist_ok=True)
    np.save(files["edges.npy"], np.stack([src, dst]))
    with open(files["edges.mtx"], "w") as f:
        f.write(f"%%MatrixMarket matrix coordinate pattern general\n{n} {n} {src.size}\n")
        pd.DataFrame({"r": src + 1, "c": dst + 1}).to_csv(f, sep=" ", header=False, index=False)
    coo = sp.coo_matrix((np.ones(src.size, dtype=np.float32), (src, dst)), shape=(n, n))
    sp.save_npz(files["coo.npz"], coo)
    sp.save_npz(files["csr.npz"], sp.csr_matrix((coo.data, (coo.row, coo.col)), shape=(n, n)))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--edge-factor", type=int, default=8)
    args = parser.parse_args()
    folder = RESULTS / "formats"
    files = write_inputs(folder, args.scale, args.edge_factor)
    mtx = MtxSource(str(files["edges.mtx"]))
    start = time.perf_counter()
    entries = count_data_lines(mtx.file.plain(), mtx.header.data_start)
    count_s = time.perf_counter() - start
    rows = []
    for name, path in files.items():
        out = folder / f"{name}.zarr"
        command = [sys.executable, "-m", "gtool.cli", "shard", str(path), "-o", str(out), "--overwrite", "-q"]
        figures, _ = measured(command)
        rows.append({"format": name, "bytes": path.stat().st_size, **figures})
        shutil.rmtree(out)
    base = rows[0]
    print(f"{'input':10s} {'MB':>8s} {'wall s':>8s} {'peak MB':>9s} {'time x':>7s} {'peak x':>7s}")
    for r in rows:
        print(
            f"{r['format']:10s} {r['bytes'] / 2**20:8.0f} {r['wall_s']:8.1f} {r['peak_rss_mb']:9.0f} "
            f"{r['wall_s'] / base['wall_s']:7.2f} {r['peak_rss_mb'] / base['peak_rss_mb']:7.2f}"
        )
    mb = files["edges.mtx"].stat().st_size / 2**20
    print(f"mtx entry count alone: {entries:,} entries, {count_s:.2f} s ({mb / count_s:.0f} MB/s)")
    rows.append({"format": "mtx entry count", "entries": entries, "wall_s": count_s})
    (RESULTS / "bench_formats.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
