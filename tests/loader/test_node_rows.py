"""A mini-batch step's feature rows, read in one selection: the stored rows of its positions and feature
band, zero-padded; a non-finite value, a damaged or a missing chunk among them is an error naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from gtool.errors import StoreError
from gtool.geometry.bands import band
from gtool.loader import ReadStats, read_feature_rows
from gtool.store import layout
from gtool.store.reader import open_store
from tests.support.storefiles import array_chunks
from tests.support.stores import StoreFactory

POSITIONS = np.array([0, 3, 4, 9, 60, 127])


@pytest.fixture
def copy(stores: StoreFactory, tmp_path: Path) -> Path:
    return Path(
        stores.private_copy("rmat:7:4", tmp_path / "rows.zarr", tiles=2, num_features=7, num_classes=3)
    )


def test_the_rows_of_the_positions_in_the_feature_band_are_read_padded_and_counted(copy: Path) -> None:
    store, stats = open_store(str(copy)), ReadStats()
    stored = zarr.open_array(copy / layout.FEATURES, mode="r")[:]
    cols = band(1, 2, 7)  # columns 4-6 of a band of 4: one padding column
    rows = read_feature_rows(store, POSITIONS, cols, stats).numpy()
    assert (
        rows.shape == (6, 4) and np.array_equal(rows[:, :3], stored[POSITIONS, 4:7]) and not rows[:, 3].any()
    )
    assert stats.bytes == 6 * 3 * 4
    assert read_feature_rows(store, POSITIONS[:0], cols, stats).shape == (0, 4) and stats.bytes == 72


def test_a_nan_among_the_rows_is_refused_and_one_elsewhere_is_not_read(copy: Path) -> None:
    zarr.open_array(copy / layout.FEATURES, mode="r+")[5, 0] = np.nan
    store, cols = open_store(str(copy)), band(0, 1, 7)
    read_feature_rows(store, POSITIONS, cols, ReadStats())  # row 5 is not among them
    with pytest.raises(StoreError, match=r"nodes/features \(a step's rows\): non-finite values"):
        read_feature_rows(store, np.array([2, 5]), cols, ReadStats())


@pytest.mark.parametrize(("damage", "said"), [("corrupt", "checksum does not match"), ("delete", "missing")])
def test_a_damaged_or_missing_chunk_is_named(copy: Path, damage: str, said: str) -> None:
    for chunk in array_chunks(copy / layout.FEATURES):
        chunk.write_bytes(b"not blosc") if damage == "corrupt" else chunk.unlink()
    with pytest.raises(StoreError, match=f"array {layout.FEATURES}, chunk \\(0, 0\\): .*{said}"):
        read_feature_rows(open_store(str(copy)), POSITIONS, band(0, 1, 7), ReadStats())
