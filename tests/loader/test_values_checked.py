"""`gtool train` refuses a store whose values break the store format, for what a rank reads, before
training starts: arrays rewritten through zarr (so their checksums are valid) with a negative weight, an
out-of-range label or a NaN feature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.store import layout
from tests.support.stores import StoreFactory


def negative_weight(group: zarr.Group) -> str:
    val = group[layout.tile_array(0, 1, 2, "val")]
    val[0] = -val[0]
    return f"array {layout.tile_group(0, 1, 2)}): weights that are not finite and positive (entry 0 is -"


def label_out_of_range(group: zarr.Group) -> str:
    for order in ("r", "c"):
        group[layout.LABELS[order]][5] = 4
    return "rows 0-127): values outside [-1, 3]"


def nan_feature(group: zarr.Group) -> str:
    group[layout.FEATURES][9, 3] = np.nan
    return f"array {layout.FEATURES} (rows 0-127): non-finite values (first in row 9 of the band)"


@pytest.mark.parametrize("damage", [negative_weight, label_out_of_range, nan_feature])
def test_train_refuses_values_the_store_format_forbids(stores: StoreFactory, tmp_path: Path, damage) -> None:
    copy = stores.private_copy("rmat:7:4", tmp_path / "bad.zarr", tiles=3, num_features=8, num_classes=4)
    expected = damage(zarr.open_group(copy, mode="r+"))
    result = CliRunner().invoke(app, ["train", copy, "--epochs", "1"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], result.output
    assert "epoch" not in result.output
