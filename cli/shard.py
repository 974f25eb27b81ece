"""`gtool shard SOURCE --tiles 16x16 [-o STORE]`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from gtool.collector import settle
from gtool.preprocess import SOURCE_KINDS, Preparation, ShardOptions
from gtool.units import human_bytes

from .common import QUIET, console, ignore_signals_at_exit, out, reports_errors
from .options import made, with_options

if TYPE_CHECKING:
    from gtool.preprocess import ShardSummary


def default_output(source: str) -> str:
    """STORE default: the source's name with .zarr, in the current directory."""
    stem = (
        Path(source.rstrip("/")).name.split(".")[0] if not source.startswith(("rmat:", "grid:")) else source
    )
    return stem.replace(":", "-") + ".zarr"


@reports_errors
@with_options(ShardOptions)
def shard(
    source: str = typer.Argument(..., metavar="SOURCE", help=f"The graph: {SOURCE_KINDS}."),
    output: str = typer.Option(
        None,
        "--output",
        "-o",
        metavar="STORE",
        help="Store path or fsspec URL.",
        show_default="SOURCE's name.zarr",
    ),
    quiet: bool = QUIET,
    **flags: Any,
) -> None:
    """Shard a graph into a 2D-tiled Zarr store: normalized, permuted, out of core."""
    from gtool.interrupts import Interrupts
    from gtool.preprocess import shard as run_shard

    options = made(ShardOptions, **flags, progress=not quiet)
    settle()  # imports done: preparing a source may be long, and the cluster's workers fork from here
    # A signal after the store is published, while the pipeline stops its cluster or this prints the
    # summary, ends the command with status 0 saying the store is complete (gtool.interrupts).
    with Interrupts():
        summary = run_shard(source, output or default_output(source), options, console=console)
        print_summary(summary, external_cluster=bool(options.scheduler))
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
    table.add_row("time", f"{s.seconds:.1f} s ({stages})" if stages else f"{s.seconds:.1f} s")
    if s.stage_io:
        table.add_row("disk I/O", stage_io_text(s))
    uncounted = " (an external cluster's workers not counted)" if external_cluster else ""
    table.add_row("peak memory", f"{s.peak_rss_mb:,.0f} MB RSS of the process tree{uncounted}")
    if s.prepared is not None and (s.prepared.extracted or s.prepared.reused):
        table.add_row("inputs", prepared_text(s.prepared))
    table.add_row("spill", f"{human_bytes(s.spill_peak_bytes)} on disk at most")
    table.add_row("written", human_bytes(s.bytes_written))
    out.print(table)


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
