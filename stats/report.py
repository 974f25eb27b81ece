"""Everything `gtool stats` reports about a store, as one JSON-ready dict, from at most two tile scans.

Scan 1 reads every tile once for the tile figures, the grid shards and (for --compare with a
degree-aware scheme) the node degrees; scan 2, only for --compare, re-reads A0 to count every scheme.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gtool.architecture import ModelConfig
from gtool.geometry.collectives import bytes_by_group, epoch_collectives, wire_bytes_by_group
from gtool.geometry.grid import ProcessGrid
from gtool.stats.compare import COMPARED, RowDegrees, needs_degrees, scheme_counter, stored_scheme
from gtool.stats.grid import grid_cells, layer_balance, rank_reads
from gtool.stats.tiles import TouchedLines, matrix_tile_stats
from gtool.store.cells import CellCounts
from gtool.store.reader import Store
from gtool.store.scan import Progress, TileVisitor, scan_nnz, scan_tiles

VALUE_BYTES = 4
"""float32 activations, gradients and weights, as `gtool train` uses by default."""

StartScan = Callable[[str, int], Progress | None]
"""Given a description and the nonzeros a scan will read, returns its per-tile progress callback (or None)."""


@dataclass(frozen=True)
class GridPlan:
    """The training layout to size: a process grid and the model trained on it."""

    grid: ProcessGrid
    model: ModelConfig


def collect_stats(
    store: Store, plan: GridPlan | None = None, compare: bool = False, start_scan: StartScan | None = None
) -> dict[str, Any]:
    """Tile figures of every stored matrix, plus the grid figures for `plan` and the scheme comparison."""
    touched = TouchedLines(store)
    visitors: list[TileVisitor] = [touched]
    if plan is not None:
        cells = grid_cells(plan.grid, store)
        visitors.append(cells)
    degrees = RowDegrees(store) if compare and needs_degrees(COMPARED) else None
    if degrees is not None:
        visitors.append(degrees)
    run_scan(store, visitors, "reading tiles", start_scan)

    scheme, seed = stored_scheme(store)
    report: dict[str, Any] = {
        "store": store.location,
        "num_nodes": store.num_nodes,
        "nnz": {str(m): int(store.tile_nnz(m).sum()) for m in store.matrices},
        "tiles": store.tiles,
        "tile_size": store.tile_size,
        "permutation": {"scheme": scheme, "seed": seed},
        "matrices": {str(s.matrix): s.summary() for s in matrix_tile_stats(store, touched)},
    }
    if plan is not None:
        report["grid"] = grid_report(store, plan, cells)
    if compare:
        counter = scheme_counter(store, degrees.original_order(store.perm("r")) if degrees else None)
        run_scan(store, [counter], "counting schemes", start_scan)
        report["compare"] = [s.summary() for s in counter.results(scheme)]
    return report


def run_scan(store: Store, visitors: list[TileVisitor], what: str, start_scan: StartScan | None) -> None:
    """One tile scan, reporting progress when asked to."""
    progress = start_scan(what, scan_nnz(store, visitors)) if start_scan else None
    scan_tiles(store, visitors, progress)


def grid_report(store: Store, plan: GridPlan, cells: CellCounts) -> dict[str, Any]:
    """Per-layer rank balance, per-rank reads and the epoch's collectives (exactly as gtool.trainer issues
    them, gtool.geometry.collectives) for a grid."""
    model = plan.model
    widths = model.widths(store.num_features, store.num_classes)
    orders = model.orders(store.num_features, store.num_classes)
    shapes, parts = model.shapes(plan.grid, store.num_nodes, store.num_features, store.num_classes)
    collectives = epoch_collectives(shapes, model.learnable_features, model.wire_itemsize, parts)
    return {
        "dims": list(plan.grid.dims),
        "placement": plan.grid.placement,
        "layers": plan.model.layers,
        "hidden": plan.model.hidden,
        "widths": widths,
        "orders": [shape.geometry.order for shape in shapes],
        "layer_balance": [b.summary() for b in layer_balance(plan.grid, orders, store, cells, model.start)],
        "ranks": [r.summary() for r in rank_reads(plan.grid, orders, store, model.start)],
        "collectives": {
            "list": [c.summary(VALUE_BYTES) for c in collectives],
            "wire_bytes_by_group": wire_bytes_by_group(collectives, VALUE_BYTES),
            "bytes_by_group": bytes_by_group(collectives, VALUE_BYTES),
        },
    }
