"""`gtool verify STORE`: every chunk's checksum and every invariant of a store, one read of each chunk."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TimeRemainingColumn
from rich.table import Table

from gtool.collector import settle
from gtool.terminal import description_column, labelled, transient_progress

from .common import QUIET, console, out, reports_errors

if TYPE_CHECKING:
    from gtool.store.verify import VerifyReport


def summary_table(report: VerifyReport, every_chunk: bool) -> Table:
    """What was checked, one row per family of checks; a family with a problem says so instead of
    claiming it holds."""
    table = Table(title=f"gtool verify {report.location}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    checksums = report.arrays - report.unchecksummed_arrays
    table.add_row(
        "chunks",
        f"{report.chunks:,} chunks of {report.arrays:,} arrays read once; "
        + (
            "every chunk file present" + checked(report.clean("chunks"))
            if every_chunk
            else "written before gtool stored every chunk: a missing chunk file reads as zeros, unnoticed"
        ),
    )
    table.add_row(
        "checksums",
        f"crc32c in {checksums:,} arrays"
        + (
            f"; {report.unchecksummed_arrays:,} written without checksums (before gtool had them): "
            "only their decoding and invariants are checked"
            if report.unchecksummed_arrays
            else ""
        ),
    )
    for m, tiles in report.tiles.items():
        table.add_row(
            f"A{m}",
            f"{tiles:,} tiles, {report.nonzeros[m]:,} nonzeros: sorted unique (row, col), indices inside "
            "their tile, finite positive weights, tile and total nnz as in the metadata"
            + checked(report.clean(f"adj/{m}/", f"A{m}")),
        )
    if report.transposed_pairs:
        other = "A1" if 1 in report.tiles else "A0"
        table.add_row(
            "symmetry",
            f"{report.transposed_pairs:,} tile pairs: {other} tile (j, i) = A0 tile (i, j)^T"
            + checked(report.clean("symmetry")),
        )
    else:
        table.add_row("symmetry", "not checked: the graph is not symmetrized")
    table.add_row(
        "permutations",
        "perm/r and perm/c hold every node id once (scheme respected)" + checked(report.clean("perm")),
    )
    table.add_row(
        "nodes",
        f"{report.node_rows:,} feature rows finite; labels and splits of both orders in range and "
        "alike (older stores: in range)" + checked(report.clean("nodes/")),
    )
    return table


def checked(clean: bool) -> str:
    """What a summary row adds when a problem was found in what it describes."""
    return "" if clean else " (not so: see the problems below)"


@reports_errors
def verify(store: str = typer.Argument(..., help="Store path or fsspec URL."), quiet: bool = QUIET) -> None:
    """Read every chunk of a store once: checksums and invariants. Exit status 1 lists every problem."""
    from gtool.interrupts import Interrupts
    from gtool.store.reader import open_store
    from gtool.store.verify import store_arrays, total_chunks, verify_store

    opened = open_store(store)
    settle()  # imports done: the scan may be long (gtool.collector)

    arrays = store_arrays(opened)
    columns = (description_column(style=""), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with transient_progress(console, *columns, shown=not quiet) as progress:
        task = progress.add_task("verify (chunks)", total=total_chunks(arrays))
        with Interrupts():  # SIGTERM says 'terminated' as Ctrl-C says 'interrupted'
            report = verify_store(opened, arrays, lambda chunks: progress.advance(task, chunks))
    out.print(summary_table(report, opened.meta.every_chunk))
    if report.ok:
        out.print(labelled("ok:", "bold green", "no problems found"))
        return
    for problem in report.problems:
        out.print(labelled("problem:", "bold red", problem), soft_wrap=True)
    out.print(labelled(f"{len(report.problems)} problem(s)", "bold red", f"in {store}"))
    raise typer.Exit(1)
