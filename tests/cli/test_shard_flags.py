"""`gtool shard`'s flags come from ShardOptions' declarations (gtool.options): each is on the help page, and
a bad value of each is refused in one `error:` line naming the flag, exit status 2, nothing written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.options import declared
from gtool.preprocess.options import ShardOptions

BAD = {
    "tiles": "4x2",
    "directed": "--directed=yes",
    "norm": "rw",
    "perm": "random",
    "seed": "-1",
    "num_nodes": "0",
    "features": " ",
    "labels": "",
    "split": "",
    "num_features": "0",
    "num_classes": "0",
    "root": "",
    "memory_limit": "2XB",
    "workers": "-2",
    "scheduler": "",
    "worker_timeout": "0",
    "dashboard": "--dashboard=on",
    "spill_dir": "",
    "cache_dir": " ",
    "no_cache": "--no-cache=1",
    "overwrite": "--overwrite=no",
}
"""One bad value of every flag (a switch given a value), by field name."""

FLAGS = {field.name: spec.flag_of(field.name) for field, spec in declared(ShardOptions)}


def test_every_declared_flag_has_a_bad_value_here() -> None:
    assert set(BAD) == set(FLAGS)


def test_the_help_page_shows_every_declared_flag_with_its_help() -> None:
    page = CliRunner().invoke(app, ["shard", "--help"]).output
    flat = " ".join(page.split())
    for field, spec in declared(ShardOptions):
        assert spec.flag_of(field.name) in page
        assert " ".join(spec.help.split()) in flat, field.name


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_error_line_naming_the_flag(name: str, tmp_path: Path) -> None:
    flag, bad = FLAGS[name], BAD[name]
    given = [bad] if bad.startswith("--") else [flag, bad]
    out = tmp_path / "s.zarr"
    result = CliRunner().invoke(app, ["shard", "grid:3x3", "-q", "-o", str(out), *given])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and flag in errors[0], result.output
    assert "Traceback" not in result.output and not list(tmp_path.iterdir())


def test_the_options_are_frozen_and_checked_when_made() -> None:
    options = ShardOptions(tiles=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.tiles = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="--workers must be >= 1, got -2"):
        ShardOptions(workers=-2)
