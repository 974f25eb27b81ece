"""Which shards, tiles, feature block and label rows a rank holds (gtool.geometry.layers)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gtool.geometry.grid import ProcessGrid, as_grid
from gtool.geometry.layers import layer_orders, rank_geometry
from gtool.geometry.tiles import tile_size
from gtool.loader import load_rank
from tests.loader.expected import label_range, layer_rects, tiles_overlapped


def test_bands_of_different_axes_are_different_shards() -> None:
    """3x2x1, one matrix: band 0 of x, y and z are three different rectangles, so three shards."""
    geometry = rank_geometry(ProcessGrid(3, 2, 1), 0, 3, 143, 7, two_matrices=False)
    assert len(geometry.shards) == 3
    assert [(s.rows.size, s.inputs.size) for s in geometry.layers] == [
        (48, 72),
        (143, 48),
        (72, 143),
    ]


@pytest.mark.parametrize("two", [False, True])
@pytest.mark.parametrize("layers", range(1, 8))
def test_distinct_shard_count(layers: int, two: bool) -> None:
    """All bands differ (2x3x5, last rank): min(3, L) shards with one matrix, min(6, L) with two."""
    geometry = rank_geometry(ProcessGrid(2, 3, 5), 29, layers, 1000, 7, two)
    assert len(geometry.shards) == min(6 if two else 3, layers)


def test_identical_rectangles_are_one_shard() -> None:
    """1x1x1: every layer multiplies the whole matrix, so one shard per stored matrix."""
    assert len(rank_geometry(ProcessGrid(1, 1, 1), 0, 4, 143, 7, two_matrices=True).shards) == 2
    assert len(rank_geometry(ProcessGrid(1, 1, 1), 0, 4, 143, 7, two_matrices=False).shards) == 1


@pytest.mark.parametrize("tiles", [4, 5, 7])
@pytest.mark.parametrize(
    "dims", [(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 2), (3, 2, 1), (4, 3, 2)]
)
def test_rank_tiles_are_the_tiles_the_layer_rectangles_overlap(
    dims: tuple[int, int, int], tiles: int
) -> None:
    grid, n = ProcessGrid(*dims), 143
    for rank, layers, two in itertools.product(range(grid.size), range(1, 5), (False, True)):
        want = tiles_overlapped(layer_rects(dims, rank, layers, n, two), n, tiles)
        assert set(rank_geometry(grid, rank, layers, n, 7, two).tiles(n, tiles)) == want


@pytest.mark.parametrize("tiles", [4, 5, 7])
@pytest.mark.parametrize("dims", [(2, 2, 2), (3, 2, 1), (4, 3, 2)])
def test_tile_cuts_of_a_layer_partition_the_matrix(dims: tuple[int, int, int], tiles: int) -> None:
    """For each layer, the cuts of all ranks' shards cover every matrix entry exactly once."""
    grid, n = ProcessGrid(*dims), 143
    size = tile_size(n, tiles)
    for layer in range(3):
        shards = {rank_geometry(grid, r, layer + 1, n, 7, False).layers[layer] for r in range(grid.size)}
        covered = [[0] * n for _ in range(n)]
        for shard in {s.key: s for s in shards}.values():
            for cut in shard.tiles(n, tiles):
                for r in range(cut.row_lo, cut.row_hi):
                    for c in range(cut.col_lo, cut.col_hi):
                        row, col = cut.i * size + r, cut.j * size + c
                        assert (row - shard.rows.start, col - shard.inputs.start) == (
                            r + cut.row_offset,
                            c + cut.col_offset,
                        )
                        covered[row][col] += 1
        assert all(v == 1 for row in covered for v in row)


def test_feature_block_and_label_rows() -> None:
    """Features: rows = band y of Gy, columns = feature band z of Gz; labels: last layer's row band."""
    grid, n, f = ProcessGrid(3, 2, 4), 143, 10
    rank = grid.rank(2, 1, 3)
    geometry = rank_geometry(grid, rank, 3, n, f, True)
    rows, cols = geometry.feature_rows, geometry.feature_cols
    assert (rows.start, rows.stop, rows.size) == (72, 143, 72)
    assert (cols.start, cols.stop, cols.size) == (9, 10, 3)
    for layers, (start, stop, size) in {1: (96, 143, 48), 2: (108, 143, 36), 3: (72, 143, 72)}.items():
        got = rank_geometry(grid, rank, layers, n, f, True).label_rows
        assert (got.start, got.stop, got.size) == (start, stop, size)


@pytest.mark.parametrize("dims", [(2, 2, 2), (3, 2, 1), (4, 3, 2)])
def test_label_rows_follow_the_last_layer(dims: tuple[int, int, int]) -> None:
    grid = ProcessGrid(*dims)
    for rank, layers in itertools.product(range(grid.size), range(1, 7)):
        got = rank_geometry(grid, rank, layers, 143, 7, True).label_rows
        want, _ = label_range(dims, rank, layers, 143)
        assert (got.start, got.stop, got.size) == (want.start, want.stop, want.size)


ORDERS = list(itertools.product((False, True), repeat=3))
"""Every order of 3 layers (True: transform-first)."""


@pytest.mark.parametrize("dims", [(2, 2, 2), (3, 2, 1), (4, 3, 2)])
def test_transform_first_layers_hold_the_rectangles_and_labels_the_docs_give(
    dims: tuple[int, int, int],
) -> None:
    """A transform-first layer's shard is A[band of its c axis, band of its b axis]; its output rows, and
    so the labels after it, are that band of c."""
    grid, n = ProcessGrid(*dims), 143
    for rank, orders, two in itertools.product(range(grid.size), ORDERS, (False, True)):
        geometry = rank_geometry(grid, rank, orders, n, 7, two)
        got = [(s.matrix, s.rows.start, s.rows.stop, s.inputs.start, s.inputs.stop) for s in geometry.layers]
        want = [
            (r.matrix, r.rows.start, r.rows.stop, r.cols.start, r.cols.stop)
            for r in layer_rects(dims, rank, orders, n, two)
        ]
        assert got == want, (rank, orders)
        labels, _ = label_range(dims, rank, orders, n)
        assert (geometry.label_rows.start, geometry.label_rows.stop) == (labels.start, labels.stop)


@pytest.mark.parametrize("dims", [(2, 2, 2), (3, 2, 1), (4, 3, 2)])
def test_each_output_block_is_the_next_layers_input_block(dims: tuple[int, int, int]) -> None:
    """In any order of the layers, layer l's output block [rows, out_cols] is layer l+1's input block
    [inputs, in_cols], and its weight block is replicated over the group of its weight axis alone."""
    grid, n, widths = ProcessGrid(*dims), 143, [11, 7, 7, 5]
    for rank, orders in itertools.product(range(grid.size), ORDERS):
        layers = rank_geometry(grid, rank, orders, n, widths[0], True).layers
        for layer, following in zip(layers, layers[1:], strict=False):
            width = widths[layer.layer + 1]
            assert (layer.rows, layer.out_cols(width)) == (following.inputs, following.in_cols(width))
        for layer in layers:
            axes = {layer.roles[2], layer.out_col_axis, layer.weight_axis}
            assert axes == {0, 1, 2} and layer.replica_axis not in (layer.row_axis, layer.out_col_axis)


def test_layers_and_grids_of_other_types_are_refused_not_misread() -> None:
    """A string of layers read as one order per character ('3': one layer); a float grid failed deep."""
    assert layer_orders(np.int64(2)) == (False, False) and layer_orders(np.array([1, 0])) == (True, False)
    for layers in ("3", 2.0):
        with pytest.raises(TypeError, match="layers must be a number of layers or a sequence of orders"):
            layer_orders(layers)
    assert as_grid([3, np.int64(1), 1]) == ProcessGrid(3, 1, 1)
    for grid in (2, (2, 2), (2.0, 1, 1), "2x2x2"):
        with pytest.raises(TypeError, match=r"a grid is a ProcessGrid or three integers \(Gx, Gy, Gz\)"):
            as_grid(grid)
    assert ProcessGrid(3, 1, 1).coords(np.int64(2)) == (2, 0, 0)
    with pytest.raises(TypeError, match="a rank is an integer, got '0'"):  # was a comparison's TypeError
        ProcessGrid(3, 1, 1).coords("0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workers must be >= 1"):  # was the thread pool's own message
        load_rank("nowhere.zarr", (1, 1, 1), 0, 2, workers=0)
