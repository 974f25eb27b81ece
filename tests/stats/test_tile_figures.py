"""Per-matrix tile figures of `gtool stats`, each checked against numpy on the reassembled matrix."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.stats.report import collect_stats
from tests.stats.conftest import StatsStore, tile_counts, touched_per_tile


@pytest.fixture(scope="module")
def report(stats_store: StatsStore) -> dict:
    return collect_stats(stats_store.store)


def test_every_stored_matrix_is_reported(stats_store: StatsStore, report: dict) -> None:
    assert sorted(report["matrices"]) == [str(m) for m in stats_store.matrices]
    assert report["nnz"] == {str(m): a.nnz for m, a in stats_store.matrices.items()}
    assert report["permutation"] == {"scheme": stats_store.case.perm, "seed": 3}


def test_tile_nnz_figures(stats_store: StatsStore, report: dict) -> None:
    store = stats_store.store
    for m, matrix in stats_store.matrices.items():
        counts = tile_counts(matrix, store.tiles, store.tile_size)
        got = report["matrices"][str(m)]["tile_nnz"]
        assert np.array_equal(got["tile_nnz"], counts)
        assert (got["min"], got["max"], got["empty"]) == (
            counts.min(),
            counts.max(),
            int((counts == 0).sum()),
        )
        assert got["mean"] == pytest.approx(counts.mean())
        assert got["max_over_mean"] == pytest.approx(counts.max() / counts.mean())
        assert got["cv"] == pytest.approx(counts.std() / counts.mean())


def test_band_nnz(stats_store: StatsStore, report: dict) -> None:
    store = stats_store.store
    size = store.tile_size
    for m, matrix in stats_store.matrices.items():
        coo = matrix.tocoo()
        for key, index in (("row_band_nnz", coo.row), ("col_band_nnz", coo.col)):
            bands = np.bincount(index // size, minlength=store.tiles)
            got = report["matrices"][str(m)][key]
            assert got["nnz"] == bands.tolist()
            assert (got["min"], got["max"]) == (bands.min(), bands.max())
            assert got["max_over_mean"] == pytest.approx(bands.max() / bands.mean())


@pytest.mark.parametrize(("key", "axis"), [("nonzero_rows", 0), ("nonzero_cols", 1)])
def test_rows_and_columns_touched_per_tile(
    stats_store: StatsStore, report: dict, key: str, axis: int
) -> None:
    store = stats_store.store
    for m, matrix in stats_store.matrices.items():
        touched = touched_per_tile(matrix, store.tiles, store.tile_size, axis)
        got = report["matrices"][str(m)][key]
        assert np.array_equal(got["per_tile"], touched)
        assert got["total"] == touched.sum()
        assert got["fraction"] == pytest.approx(touched.sum() / (store.tiles * store.num_nodes))
        assert (got["min"], got["max"]) == (touched.min(), touched.max())
        assert got["mean"] == pytest.approx(touched.mean())
