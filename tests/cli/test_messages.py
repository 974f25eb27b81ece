"""What gtool prints is what was meant: user text as given (no rich markup or emoji codes applied to a
source, a file or a store name), sizes in the unit that fits them, and one `error:` line (no traceback)
for each bad value."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gtool.cli.main import app
from tests.support.stores import StoreFactory


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


def error_line(*args: str) -> str:
    code, output = run(*args)
    assert code == 2 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


def test_a_source_with_an_emoji_code_is_printed_as_given() -> None:
    line = error_line("shard", "rmat:abc:", "-q")
    assert line.startswith("error: rmat:abc:: not a generator spec; expected rmat:SCALE[:EDGEFACTOR[:SEED]]")


def test_file_names_with_markup_and_emoji_codes_are_printed_as_given(tmp_path: Path) -> None:
    features = tmp_path / "a:smile:b.npy"
    line = error_line("shard", "grid:3x3", "--features", str(features), "-q", "-o", str(tmp_path / "s.zarr"))
    assert line == f"error: {features}: no such file"
    source = tmp_path / "[red]x:smile:.txt"
    assert f"error: {source}: no such file or directory" in error_line("shard", str(source), "-q")


def test_a_store_name_with_markup_is_printed_as_given(stores: StoreFactory, tmp_path: Path) -> None:
    store = tmp_path / "[bold]g:smile:.zarr"
    store.symlink_to(stores("grid:3x3", tiles=1))
    code, output = run("info", str(store))
    assert code == 0 and f"gtool store {store}" in output


def test_a_small_memory_limit_is_said_in_a_unit_that_fits_it() -> None:
    line = error_line("shard", "grid:30x30", "--memory-limit", "1KB", "-q")
    assert "more than half of --memory-limit 1.0 KiB: give fewer tiles" in line and " 0 MB" not in line
    line = error_line("shard", "grid:30x30", "--memory-limit", "300MB", "-w", "4", "-q")
    assert "--memory-limit 300.0 MiB is too small for 900 nodes with 4 workers: give at least" in line


def test_negative_workers_is_one_error_line() -> None:
    assert error_line("shard", "grid:3x3", "--workers", "-2", "-q") == "error: --workers must be >= 1, got -2"


def test_a_plot_that_is_not_a_png_is_one_error_line(stores: StoreFactory, tmp_path: Path) -> None:
    plot = tmp_path / "tiles.txt"
    line = error_line("stats", stores("grid:3x3", tiles=1), "--plot", str(plot))
    assert line == f"error: --plot {plot}: expected a .png file name (the heatmap is written as a PNG)"
    assert not plot.exists()


def test_the_plot_names_the_file_it_wrote(stores: StoreFactory, tmp_path: Path) -> None:
    plot = tmp_path / "tiles.png"
    code, output = run("stats", stores("grid:3x3", tiles=1), "--plot", str(plot))
    assert code == 0 and plot.stat().st_size > 0
    assert f"wrote the heatmap of tile nonzeros to {plot}" in output
