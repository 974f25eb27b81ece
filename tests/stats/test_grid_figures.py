"""`gtool stats --grid`: per-rank shard nonzeros, reads and all-reduce volume, from docs/3d-gcn.md alone."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.architecture import ModelConfig
from gtool.geometry.grid import ProcessGrid
from gtool.stats.report import GridPlan, collect_stats
from gtool.store import layout
from tests.loader.expected import (
    band_range,
    feature_ranges,
    label_range,
    layer_axes,
    layer_rects,
    row_axes,
    tiles_overlapped,
)
from tests.stats.conftest import StatsStore, tile_counts

GRIDS = [(3, 2, 1), (2, 3, 2), (2, 2, 2), (1, 1, 1)]
HIDDEN = 10


def model_orders(store, config: ModelConfig) -> list[bool]:
    return list(config.orders(store.num_features, store.num_classes))


@pytest.fixture(scope="module", params=GRIDS, ids=lambda d: "x".join(map(str, d)))
def dims(request: pytest.FixtureRequest) -> tuple[int, int, int]:
    return request.param


@pytest.mark.parametrize(("layers", "order"), [(1, "auto"), (3, "auto"), (4, "auto"), (4, "transform-first")])
def test_rank_shard_nnz_and_reads(
    stats_store: StatsStore, dims: tuple[int, int, int], layers: int, order: str
) -> None:
    store, n, t = stats_store.store, stats_store.store.num_nodes, stats_store.store.tiles
    two = store.two_matrices
    config = ModelConfig(layers=layers, hidden=HIDDEN, layer_order=order)
    grid = collect_stats(store, GridPlan(ProcessGrid(*dims), config))["grid"]
    orders = model_orders(store, config)
    tile_nnz = {m: tile_counts(a, t, store.tile_size) for m, a in stats_store.matrices.items()}
    feature_bytes = store.array(layout.FEATURES).dtype.itemsize
    for rank in range(int(np.prod(dims))):
        rects = layer_rects(dims, rank, orders, n, two)
        for layer, rect in enumerate(rects):
            block = stats_store.matrices[rect.matrix][
                rect.rows.start : rect.rows.stop, rect.cols.start : rect.cols.stop
            ]
            assert grid["layer_balance"][layer]["rank_nnz"][rank] == block.nnz
        tiles = tiles_overlapped(rects, n, t)
        rows, cols = feature_ranges(dims, rank, n, store.num_features)
        labels, order = label_range(dims, rank, orders, n)
        label_row = (
            store.array(layout.LABELS[order]).dtype.itemsize + store.array(layout.SPLIT[order]).dtype.itemsize
        )
        read = grid["ranks"][rank]
        assert read["tiles"] == len(tiles)
        assert read["tile_bytes"] == 12 * sum(tile_nnz[m][i, j] for m, i, j in tiles)
        assert read["feature_bytes"] == (rows.stop - rows.start) * (cols.stop - cols.start) * feature_bytes
        assert read["label_bytes"] == (labels.stop - labels.start) * label_row


def test_layer_balance_summary(stats_store: StatsStore, dims: tuple[int, int, int]) -> None:
    config = ModelConfig(layers=3, hidden=HIDDEN)
    grid = collect_stats(stats_store.store, GridPlan(ProcessGrid(*dims), config))["grid"]
    orders = model_orders(stats_store.store, config)
    for layer, balance in enumerate(grid["layer_balance"]):
        nnz = np.array(balance["rank_nnz"])
        rows, (_, b, _) = row_axes(orders)[layer], layer_axes(orders)[layer]
        assert balance["bands"] == [dims[rows], dims[b]]
        assert balance["matrix"] == (layer % 2 if stats_store.store.two_matrices else 0)
        assert (balance["min"], balance["max"]) == (nnz.min(), nnz.max())
        assert balance["max_over_mean"] == pytest.approx(nnz.max() / nnz.mean())


def expected_wire_bytes(
    dims: tuple[int, ...], n: int, widths: list[int], orders: list[bool]
) -> tuple[dict[str, float], int]:
    """Per rank and epoch, by group, the bytes gtool train's collectives send (ring: an all-reduce
    2 (g - 1) / g of its operand, an all-gather or reduce-scatter (g - 1) / g; float32), and how many
    collectives there are. Per aggregate-first layer: W all-gathered and dW reduce-scattered over a (W's
    part padded to G_a equal parts); H over b and Q over c forward; dH over b and dF over a backward
    except at layer 0. Per transform-first layer: W [c, a] all-gathered and dW reduce-scattered over b;
    Z = F W over c and Y = A Z over b forward; dZ over c and (except at layer 0) dF over a backward.
    The loss's row max, sum of exponentials and target logit over the last layer's class axis (b, or a
    transform-first) and the loss over its row axis (a, or c). Groups of one rank send nothing and are
    not counted."""
    totals = {"x": 0.0, "y": 0.0, "z": 0.0}
    count = 0

    def add(axis: int, elements: int, reduce: bool = True) -> None:
        nonlocal count
        g = dims[axis]
        if g > 1:
            totals["xyz"[axis]] += (2 if reduce else 1) * (g - 1) / g * elements * 4
            count += 1

    for layer, ((a, b, c), transform_first) in enumerate(zip(layer_axes(orders), orders, strict=True)):
        owners, out = (b, a) if transform_first else (a, b)  # the weight's replicas; its column band
        rows_b, rows = (
            band_range(0, dims[b], n).size,
            band_range(0, dims[c if transform_first else a], n).size,
        )
        d_in, d_out = -(-widths[layer] // dims[c]), -(-widths[layer + 1] // dims[out])
        weight = dims[owners] * -(-d_in * d_out // dims[owners])
        add(owners, weight, reduce=False)
        if transform_first:
            add(c, rows_b * d_out)
            add(b, rows * d_out)
            add(c, rows_b * d_out)
        else:
            add(b, rows * d_in)
            add(c, rows * d_out)
            if layer > 0:
                add(b, rows * d_in)
        if layer > 0:
            add(a, rows_b * d_in)
        add(owners, weight, reduce=False)
    (a, b, _), rows = layer_axes(orders)[-1], row_axes(orders)[-1]
    classes = a if orders[-1] else b
    for _ in range(3):
        add(classes, band_range(0, dims[rows], n).size)
    add(rows, 1)
    return totals, count


@pytest.mark.parametrize(("layers", "order"), [(1, "auto"), (2, "auto"), (4, "auto"), (4, "transform-first")])
def test_collective_volume(
    stats_store: StatsStore, dims: tuple[int, int, int], layers: int, order: str
) -> None:
    store = stats_store.store
    config = ModelConfig(layers=layers, hidden=HIDDEN, layer_order=order)
    grid = collect_stats(store, GridPlan(ProcessGrid(*dims), config))["grid"]
    widths = [store.num_features] + [HIDDEN] * (layers - 1) + [store.num_classes]
    assert grid["widths"] == widths
    want, count = expected_wire_bytes(dims, store.num_nodes, widths, model_orders(store, config))
    assert grid["collectives"]["wire_bytes_by_group"] == pytest.approx(want)
    assert len(grid["collectives"]["list"]) == count
