"""Rich tables of a `gtool stats` report (the dict gtool.stats.report.collect_stats returns)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from gtool.units import human_bytes

from .tables import unbroken_figures


def ratio(x: float) -> str:
    return f"{x:.3f}"


def count(x: float) -> str:
    return f"{x:,.0f}"


def new_table(title: str, *columns: str) -> Table:
    """A compact left-titled table: first column text, the others right-aligned figures. On a narrow
    terminal headers and cells wrap between words (and fold within one too long), never cut to '…'."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column(columns[0], style="bold", overflow="fold")
    for name in columns[1:]:
        table.add_column(name, justify="right", overflow="fold")
    return table


def store_table(report: dict[str, Any]) -> Table:
    t = report["tiles"]
    perm = report["permutation"]
    table = Table(title=f"gtool stats {report['store']}", show_header=False, title_justify="left", box=None)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("nodes", count(report["num_nodes"]))
    table.add_row("nonzeros", ", ".join(f"A{m} {count(n)}" for m, n in report["nnz"].items()))
    table.add_row("tiles", f"{t} x {t}, tile size {report['tile_size']:,}")
    table.add_row("permutation", f"{perm['scheme']} (seed {perm['seed']})")
    return table


def tile_table(report: dict[str, Any]) -> Table:
    """Per matrix: the spread of nonzeros over the T x T tiles."""
    table = new_table("tile nonzeros", "matrix", "min", "mean", "max", "max/mean", "cv", "empty")
    for m, s in report["matrices"].items():
        tiles = s["tile_nnz"]
        table.add_row(
            f"A{m}",
            count(tiles["min"]),
            count(tiles["mean"]),
            count(tiles["max"]),
            ratio(tiles["max_over_mean"]),
            ratio(tiles["cv"]),
            str(tiles["empty"]),
        )
    return table


def band_table(report: dict[str, Any]) -> Table:
    """Per matrix: nonzeros of the T row and column bands, and rows / columns touched per tile."""
    table = new_table(
        "bands (max/mean of T band nonzeros) and rows / columns with nonzeros per tile (mean, share)",
        "matrix", "row bands", "col bands", "nonzero rows", "nonzero cols",
    )  # fmt: skip
    for m, s in report["matrices"].items():
        rows, cols = s["nonzero_rows"], s["nonzero_cols"]
        table.add_row(
            f"A{m}",
            ratio(s["row_band_nnz"]["max_over_mean"]),
            ratio(s["col_band_nnz"]["max_over_mean"]),
            f"{count(rows['mean'])} ({rows['fraction']:.1%})",
            f"{count(cols['mean'])} ({cols['fraction']:.1%})",
        )
    return table


def layer_table(grid: dict[str, Any]) -> Table:
    dims = "x".join(map(str, grid["dims"]))
    table = new_table(
        f"grid {dims} (placement {grid['placement']}), {grid['layers']} layers: shard nonzeros over ranks",
        "layer", "matrix", "bands", "min", "mean", "max", "max/mean",
    )  # fmt: skip
    for b in grid["layer_balance"]:
        table.add_row(
            str(b["layer"]),
            f"A{b['matrix']}",
            "x".join(map(str, b["bands"])),
            count(b["min"]),
            count(b["mean"]),
            count(b["max"]),
            ratio(b["max_over_mean"]),
        )
    return table


def rank_table(grid: dict[str, Any]) -> Table:
    layers = [f"L{b['layer']} nnz" for b in grid["layer_balance"]]
    table = new_table(
        "per rank: shard nonzeros, and what it reads (whole tiles at 12 B a nonzero, features, labels)",
        "rank", "x,y,z", *layers, "tiles", "tile bytes", "node bytes", "total",
    )  # fmt: skip
    for r in grid["ranks"]:
        nnz = [count(b["rank_nnz"][r["rank"]]) for b in grid["layer_balance"]]
        table.add_row(
            str(r["rank"]),
            ",".join(map(str, r["coords"])),
            *nnz,
            str(r["tiles"]),
            human_bytes(r["tile_bytes"]),
            human_bytes(r["feature_bytes"] + r["label_bytes"]),
            human_bytes(r["total_bytes"]),
        )
    return table


def collectives_table(grid: dict[str, Any]) -> Table:
    widths = " -> ".join(map(str, grid["widths"]))
    table = new_table(
        f"collectives per epoch, widths {widths} (ring: each rank sends 2(g-1)/g x an all-reduce's operand, "
        "(g-1)/g x an all-gather's or reduce-scatter's)",
        "layer", "phase", "operand", "kind", "group", "operand bytes", "sent per rank",
    )  # fmt: skip
    for c in grid["collectives"]["list"]:
        table.add_row(
            str(c["layer"]),
            c["phase"],
            c["operand"],
            c["kind"].replace("_", "-"),
            f"{c['group']} ({c['group_size']})",
            human_bytes(c["bytes"]),
            human_bytes(c["wire_bytes"]),
        )
    totals = grid["collectives"]["wire_bytes_by_group"]
    table.add_section()
    for axis, sent in totals.items():
        groups = "whole-grid groups" if axis == "all" else f"{axis}-groups"
        table.add_row("epoch", "", "", "", groups, "", human_bytes(sent))
    table.add_row("epoch", "", "", "", "all", "", human_bytes(sum(totals.values())))
    return table


def compare_table(report: dict[str, Any]) -> Table:
    table = new_table(
        "tile nonzeros under each permutation scheme (* = this store's)",
        "scheme", "matrix", "min", "mean", "max", "max/mean", "cv", "empty",
    )  # fmt: skip
    for s in report["compare"]:
        name = f"{s['scheme']} *" if s["stored"] else s["scheme"]
        for m, st in s["matrices"].items():
            table.add_row(
                name,
                f"A{m}",
                count(st["min"]),
                count(st["mean"]),
                count(st["max"]),
                ratio(st["max_over_mean"]),
                ratio(st["cv"]),
                str(st["empty"]),
            )
            name = ""
    return table


def report_tables(report: dict[str, Any], width: int) -> list[Table]:
    """Every table of a report, in reading order, for a terminal `width` columns wide."""
    tables = [tile_table(report), band_table(report)]
    if "grid" in report:
        grid = report["grid"]
        tables += [layer_table(grid), rank_table(grid), collectives_table(grid)]
    if "compare" in report:
        tables.append(compare_table(report))
    store = store_table(report)
    store.min_width = min(len(str(store.title)), width)  # the title (the store's path) on one line
    return [store, *(unbroken_figures(table, width) for table in tables)]
