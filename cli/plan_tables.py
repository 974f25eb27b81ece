"""Rich tables of a `gtool plan` result: every grid ranked, and the best one with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table

from gtool.units import counted, human_bytes

from .tables import unbroken_figures

FEATURE_MODES = {"memory": "features in memory", "store": "read from store"}
"""The columns of a mini-batch plan's memory table, by --features-from mode."""

if TYPE_CHECKING:
    from gtool.plan import GridEstimate, Plan


def grid_table(title: str, plan: Plan, top: int) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("grid", style="bold", overflow="fold")
    table.add_column("placed (in node)", overflow="fold")
    for name in (
        "epoch s",
        "SpMM s",
        "dense s",
        "comm s",
        "x / y / z sent per rank",
        "peak/rank",
        "nnz max/mean",
    ):
        table.add_column(name, justify="right", overflow="fold")
    minibatch = plan.request.batch_size is not None
    if minibatch:
        table.add_column("features")
    table.add_column("fits")
    shown = plan.grids[:top] if top > 0 else plan.grids
    for place, g in enumerate(shown, start=1):
        t = g.time
        wire = " / ".join(human_bytes(b) for b in g.wire_bytes().values())
        style = "green" if plan.best is not None and g is plan.best else ("dim" if not g.fits else None)
        table.add_row(
            str(place),
            g.layout,
            f"{g.grid.placement} ({','.join(g.node_axes) or '-'})",
            f"{t.total:.3f}",
            f"{t.spmm.max(axis=0).sum():.3f}",
            f"{t.dense.max(axis=0).sum():.3f}",
            f"{t.comm:.3f}",
            wire,
            human_bytes(g.peak_memory),
            f"{g.nnz_imbalance:.3f}",
            *([g.run_memory.mode if g.run_memory else "-"] if minibatch else []),
            "yes" if g.fits else "no",
            style=style,
        )
    return table


def memory_table(best: GridEstimate) -> Table:
    """Where the best grid's largest rank spends its memory (in each feature mode of a mini-batch run),
    what one node's ranks hold together, and what a streamed run reads from the store."""
    worst = int(best.memory.peak.argmax())
    run = best.run_memory
    modes = run.modes if run else {"memory": best.memory}
    table = Table(
        title=f"peak memory of {best.layout}, rank {worst}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("part", style="bold")
    for mode in modes:
        chosen = " (used)" if run and len(modes) > 1 and mode == run.mode else ""
        table.add_column(FEATURE_MODES[mode] + chosen if len(modes) > 1 else "bytes", justify="right")
    parts = [e.parts(worst) for e in modes.values()]
    for part in parts[0]:
        table.add_row(part, *(human_bytes(p[part]) for p in parts))
    if run:
        table.add_row("node (its ranks)", *(human_bytes(run.node_peaks[mode]) for mode in modes))
    if run and run.reads:
        reads = run.reads
        table.add_row("store reads", *["-"] * (len(modes) - 1), f"{human_bytes(reads.step_bytes)} a step")
        table.add_row("", *[""] * (len(modes) - 1), f"{human_bytes(reads.epoch_bytes)} an epoch")
        table.add_row("", *[""] * (len(modes) - 1), "as much to evaluate")
        table.add_row("", *[""] * (len(modes) - 1), f"{human_bytes(reads.start_bytes)} at start")
    return table


def plan_tables(store: str, num_nodes: int, plan: Plan, top: int, width: int) -> list[Table]:
    """The ranked grids, the pick and its memory (when none fits, the smallest's), for a terminal `width`
    columns wide."""
    from gtool.plan import TRIAL_SPREAD, trial_grids

    r = plan.request
    widths = " -> ".join(map(str, plan.widths))
    title = (
        f"gtool plan {store}: {num_nodes:,} nodes, {counted(r.ranks, 'rank')} ({r.node_ranks} per node), "
        f"widths {widths}"
    )
    if plan.nnz_estimated:
        title += " (nnz of tiles crossed by band edges split by area; --exact-nnz counts them)"
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row(
        "best", f"{plan.best.layout}, placed {plan.best.grid.placement}" if plan.best else "none fits"
    )
    summary.add_row("why", plan.reason)
    if len(timed := trial_grids(plan)) > 1:
        grids = ", ".join(str(g.grid) for g in timed)
        summary.add_row(
            "auto",
            f"`gtool train --grid auto` on local ranks times the {len(timed)} grids predicted within "
            f"{TRIAL_SPREAD:g}x of the best ({grids}) for a few epochs, once per store, model and machine, "
            "and trains on the fastest measured",
        )
    tables = [unbroken_figures(grid_table(title, plan, top), width), summary]
    smallest = min(plan.grids, key=lambda g: g.peak_memory) if plan.grids else None
    shown = plan.best or smallest  # when none fits: the one that comes closest
    if shown is not None:
        tables.append(memory_table(shown))
    return tables
