"""`gtool shard SOURCE --tiles 16x16 [-o STORE]`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from gtool.errors import GtoolError
from gtool.geometry.grid import parse_dims
from gtool.preprocess import Preparation, ShardOptions
from gtool.units import human_bytes, parse_bytes

from .common import console, ignore_signals_at_exit, reports_errors

if TYPE_CHECKING:
    from gtool.preprocess import ShardSummary


def default_output(source: str) -> str:
    """STORE default: the source's name with .zarr, in the current directory."""
    stem = (
        Path(source.rstrip("/")).name.split(".")[0] if not source.startswith(("rmat:", "grid:")) else source
    )
    return stem.replace(":", "-") + ".zarr"


def _square_tiles(text: str) -> int:
    try:
        rows, cols = parse_dims(text, 2, "--tiles")
    except ValueError as exc:
        raise GtoolError(str(exc)) from None
    if rows != cols:
        raise GtoolError(f"--tiles must be square (T x T, store layout v1), got {text}")
    return rows


def _bytes(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise GtoolError(f"--memory-limit: {exc}") from None


@reports_errors
def shard(
    source: str = typer.Argument(
        ...,
        help="Edge file (.txt/.csv/.mtx/.npy/.parquet, optionally .gz; .npz edge arrays, scipy.sparse "
        "matrix or GNN-benchmark graph), dataset name (cora, citeseer, pubmed, arxiv, products, papers100m), "
        "OGB or Planetoid directory, or generator (rmat:SCALE[:EDGEFACTOR[:SEED]], grid:RxC).",
    ),
    tiles: str = typer.Option("16x16", "--tiles", "-t", help="Tile grid T x T."),
    output: str = typer.Option(None, "--output", "-o", help="Store path or fsspec URL [default: NAME.zarr]."),
    directed: bool = typer.Option(False, "--directed", help="Keep direction: rows aggregate incoming edges."),
    norm: str = typer.Option("sym", "--norm", help="sym: D^-1/2 (A+I) D^-1/2; none: A+I."),
    perm: str = typer.Option(
        "double",
        "--perm",
        help="Permutation: double, single, none, or balanced (degree-aware: equal nonzeros per band).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of permutations and generated node data."),
    num_nodes: int = typer.Option(
        None, "--num-nodes", help="Node count of an edge file (isolated nodes too)."
    ),
    features: str = typer.Option(
        None, "--features", help="Node features .npy/.npz, or a scipy CSR .npz (may be larger than RAM)."
    ),
    labels: str = typer.Option(None, "--labels", help="Node labels .npy/.npz/.txt (-1: unlabelled)."),
    split: str = typer.Option(
        None,
        "--split",
        help="Split per node: codes (0 train, 1 valid, 2 test, -1 none) or words (train, valid, test, none) "
        "in a .npy or a text file (one per line), or index sets train/valid/test in an .npz.",
    ),
    num_features: int = typer.Option(128, "--num-features", help="Random features when the source has none."),
    num_classes: int = typer.Option(
        None,
        "--num-classes",
        help="The labels' class count (labels are checked against it; without it, the largest label + 1, "
        "refused when implausibly large); with no labels, how many degree-quantile classes to make "
        "[default: 32].",
    ),
    root: str = typer.Option(
        None, "--root", help="Where named datasets are kept (default: $GTOOL_DATA, else ./data)."
    ),
    memory_limit: str = typer.Option(
        None, "--memory-limit", help="Peak memory of the whole run, e.g. 2GB [default: half of this machine]."
    ),
    workers: int = typer.Option(
        None,
        "--workers",
        "-w",
        help="Workers of the local cluster (1: in this process; more: worker processes) [default: cores].",
    ),
    scheduler: str = typer.Option(
        None, "--scheduler", help="Address of an existing dask.distributed scheduler."
    ),
    worker_timeout: float = typer.Option(
        60.0,
        "--worker-timeout",
        help="Seconds without a heartbeat after which a Dask worker is named, restarted and its tasks run "
        "elsewhere.",
    ),
    dashboard: bool = typer.Option(False, "--dashboard", help="Run the local cluster's Dask dashboard."),
    spill_dir: str = typer.Option(
        None,
        "--spill-dir",
        help="Folder for intermediate files, on a file system (shared by every worker with --scheduler) "
        "[default: beside STORE].",
    ),
    cache_dir: str = typer.Option(
        None,
        "--cache-dir",
        help="Where decompressed copies of compressed inputs (deflated .npz members, .gz text, OGB CSV) "
        "are kept for later runs (default: $GTOOL_CACHE, else ROOT/gtool-cache); `gtool cache list` "
        "shows them, `gtool cache clear` removes them.",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Decompress into the spill folder instead (removed at the end)."
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Replace an existing gtool store (or empty folder); nothing else is replaced.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    """Shard a graph into a 2D-tiled Zarr store: normalized, permuted, out of core."""
    from gtool.interrupts import Interrupts
    from gtool.preprocess import shard as run_shard

    options = ShardOptions(
        tiles=_square_tiles(tiles),
        directed=directed,
        norm=norm,
        perm=perm,
        seed=seed,
        num_nodes=num_nodes,
        features=features,
        labels=labels,
        split=split,
        num_features=num_features,
        num_classes=num_classes,
        root=root or os.environ.get("GTOOL_DATA"),
        memory_limit=_bytes(memory_limit),
        workers=workers,
        scheduler=scheduler,
        spill_dir=spill_dir,
        worker_timeout=worker_timeout,
        dashboard=dashboard,
        cache_dir=cache_dir,
        no_cache=no_cache,
        overwrite=overwrite,
        progress=not quiet,
    )
    # A signal after the store is published, while the pipeline stops its cluster or this prints the
    # summary, ends the command with status 0 saying the store is complete (gtool.interrupts).
    with Interrupts():
        summary = run_shard(source, output or default_output(source), options, console=console)
        print_summary(summary, external_cluster=bool(scheduler))
    ignore_signals_at_exit()


def print_summary(s: ShardSummary, external_cluster: bool = False) -> None:
    """The closing one-screen summary of a run (on an external cluster, whose workers are not in this
    process tree, when `external_cluster`)."""
    table = Table(title=f"gtool shard: {s.store}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("source", s.source)
    table.add_row("nodes", f"{s.num_nodes:,}")
    table.add_row("input edges", f"{s.input_edges:,}")
    for m, nnz in s.nnz.items():
        st = s.stats[m]
        table.add_row(
            f"A{m}",
            f"{nnz:,} nonzeros; tile nnz max {st.max:,} / mean {st.mean:,.0f} = {st.max_over_mean:.3f}",
        )
    table.add_row("tiles", f"{s.tiles} x {s.tiles} per matrix")
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in s.stage_seconds.items() if v >= 0.05)
    table.add_row("time", f"{s.seconds:.1f} s ({stages})")
    if s.stage_io:
        table.add_row("disk I/O", stage_io_text(s))
    uncounted = " (an external cluster's workers not counted)" if external_cluster else ""
    table.add_row("peak memory", f"{s.peak_rss_mb:,.0f} MB RSS of the process tree{uncounted}")
    if s.prepared is not None and (s.prepared.extracted or s.prepared.reused):
        table.add_row("inputs", prepared_text(s.prepared))
    table.add_row("spill", f"{human_bytes(s.spill_peak_bytes)} on disk at most")
    table.add_row("written", human_bytes(s.bytes_written))
    console.print(table)


def stage_io_text(s: ShardSummary) -> str:
    """Per stage of tasks: bytes read from and written to disk (page-cache hits not counted), the seconds
    the cluster was busy with it and the rate over them, one line each."""
    lines = []
    for stage, io in s.stage_io.items():
        busy = s.busy_seconds(stage)
        rate = (io.read + io.written) / busy if busy else 0.0
        lines.append(
            f"{stage}: {human_bytes(io.read)} in, {human_bytes(io.written)} out, {busy:.1f} s, "
            f"{human_bytes(rate)}/s"
        )
    return "\n".join(lines)


def prepared_text(p: Preparation) -> str:
    """What the run did with compressed inputs: copies made (how fast) and reused, and where."""
    parts = []
    if p.extracted:
        rate = p.extracted_bytes / p.extract_seconds if p.extract_seconds else 0.0
        parts.append(
            f"{len(p.extracted)} decompressed ({human_bytes(p.extracted_bytes)} in "
            f"{p.extract_seconds:.1f} s, {human_bytes(rate)}/s)"
        )
    if p.reused:
        parts.append(f"{len(p.reused)} reused ({human_bytes(p.reused_bytes)}, nothing decompressed)")
    return f"{'; '.join(parts)}; copies in {p.folder}"
