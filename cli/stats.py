"""`gtool stats STORE [--grid G --placement P --layers L --hidden H --layer-order O] [--compare] [--plot]`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TimeRemainingColumn

from gtool.architecture import COMPONENT_OPTIONS, ModelConfig
from gtool.collector import settle
from gtool.errors import GtoolError
from gtool.geometry.grid import DEFAULT_PLACEMENT, ProcessGrid, parse_dims
from gtool.terminal import description_column, transient_progress
from gtool.topology import Topology

from .common import QUIET, console, out, reports_errors
from .options import with_options
from .stats_tables import report_tables

if TYPE_CHECKING:
    from gtool.stats import GridPlan, StartScan
    from gtool.store.reader import Store


PROGRESS_MIN_NNZ = 50_000_000
"""Scans reading fewer nonzeros than this finish in seconds and show no progress bar."""


def grid_plan(grid: str | None, placement: str | None, model: dict[str, Any]) -> GridPlan | None:
    """The --grid, --placement, --layers and --hidden options as a GridPlan (None without --grid)."""
    try:
        config = ModelConfig(**model).for_mode(minibatch=False)
        if not grid:
            if placement:
                raise ValueError("--placement goes with --grid (it numbers the grid's ranks)")
            return None
        gx, gy, gz = parse_dims(grid, 3, "--grid")
        from gtool.stats import GridPlan

        return GridPlan(ProcessGrid(gx, gy, gz, placement or DEFAULT_PLACEMENT), config)
    except ValueError as exc:
        raise GtoolError(str(exc)) from None


@contextmanager
def scan_progress(quiet: bool) -> Iterator[StartScan]:
    """A transient progress bar (on stderr) for each tile scan long enough to need one."""
    columns = (description_column(style=""), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with transient_progress(console, *columns, shown=not quiet) as progress:

        def start(what: str, total: int) -> Callable[[int], None] | None:
            if total < PROGRESS_MIN_NNZ:
                return None
            task = progress.add_task(f"{what} (nonzeros)", total=total)
            return lambda nnz: progress.advance(task, nnz)

        yield start


def write_plot(store: Store, location: str, scheme: str, path: str) -> None:
    """The tile heatmap of every stored matrix, as a PNG at `path`."""
    panels = {f"A{m}": store.tile_nnz(m) for m in store.matrices}
    try:
        from gtool.stats import plot_tile_nnz  # matplotlib loads in ~1 s: only when plotting

        plot_tile_nnz(panels, path, f"tile nonzeros of {Path(location.rstrip('/')).name} ({scheme})")
    except OSError as exc:
        raise GtoolError(f"--plot: cannot write {path}: {exc.strerror or exc}") from None


@reports_errors
@with_options(
    (ModelConfig, ("layers", "hidden", "layer_order", *COMPONENT_OPTIONS)), (Topology, ("placement",))
)
def stats(
    store: str = typer.Argument(..., help="Store path or fsspec URL."),
    grid: str = typer.Option(
        None,
        "--grid",
        "-g",
        metavar="GXxGYxGZ",
        help="Process grid: per-rank shard balance, reads and all-reduces.",
    ),
    compare: bool = typer.Option(
        False, "--compare", help="Tile figures under every permutation scheme, side by side."
    ),
    plot: str = typer.Option(
        None, "--plot", metavar="FILE.png", help="Write a heatmap of tile nonzeros to this PNG."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print everything as JSON."),
    quiet: bool = QUIET,
    **model: Any,
) -> None:
    """How evenly a store spreads its nonzeros over tiles and over the ranks of a grid.

    --layers and --hidden (as gtool train's) size the model for --grid; --placement numbers its ranks as
    gtool train's does."""
    plan = grid_plan(grid, model.pop("placement"), model)
    if plot is not None and Path(plot).suffix.lower() != ".png":
        raise GtoolError(f"--plot {plot}: expected a .png file name (the heatmap is written as a PNG)")
    from gtool.stats import collect_stats
    from gtool.store.reader import open_store

    opened = open_store(store)
    settle()  # imports done: the scan may be long (gtool.collector)
    opened.check_every_chunk()  # one listing: metadata claiming chunks never stored is refused, not read
    with scan_progress(quiet) as start_scan:
        report = collect_stats(opened, plan, compare, start_scan)
    if plot:
        write_plot(opened, store, report["permutation"]["scheme"], plot)
        console.print(f"wrote the heatmap of tile nonzeros to {plot}", soft_wrap=True)
    if as_json:
        typer.echo(json.dumps(report, indent=1))
        return
    for table in report_tables(report, out.width):
        out.print(table)
