"""Every command's help page at 80 columns reads like a well-kept command line: switches without a value
(`--directed`, not `--directed <bool>`), values named in capitals, no punctuation left dangling where a
default was meant to be, no line wider than the terminal, and `gtool shard --help` naming every kind of
source (generators and dataset names too)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.preprocess.sources.kinds import DATASET_NAMES, GENERATOR_SPECS


def command_paths(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command and group, the program itself first."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from command_paths(sub, (*path, name))


COMMANDS = list(command_paths(typer.main.get_command(app)))


def help_page(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "gtool")
def test_the_help_page_reads_conventionally_at_80_columns(path: tuple[str, ...]) -> None:
    page = help_page(path)
    assert "<bool>" not in page and "<str>" not in page and "<int>" not in page
    assert not re.search(r"\{\w+\}", page.splitlines()[0])  # Usage: ... SOURCE, not {source}
    for line in page.splitlines():
        assert not re.search(r" [.,;]$", line), line  # `URL .`: a default that went missing
        assert len(line) <= 80, line
    assert "--help" in page


def test_the_shard_page_names_every_kind_of_source() -> None:
    page = " ".join(help_page(("shard",)).split())
    assert "Usage: gtool shard [OPTIONS] SOURCE" in page
    for spec in (*GENERATOR_SPECS, *DATASET_NAMES):
        assert spec in page
    assert "--directed Keep direction" in page  # a switch takes no value


def test_a_refused_source_names_every_kind_too(tmp_path) -> None:
    result = CliRunner().invoke(app, ["shard", str(tmp_path / "nope"), "-q"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "not a source name" in message
    for spec in (*GENERATOR_SPECS, *DATASET_NAMES):
        assert spec in message


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "gtool")
def test_h_shows_the_help_page(path: tuple[str, ...]) -> None:
    """`gtool ... -h` was 'No such option: -h'."""
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and result.output == help_page(path)


def test_predict_grid_names_no_option_predict_refuses() -> None:
    """`gtool predict --help` showed train's --grid text, naming --data-parallel and --batch-size, which
    predict refuses."""
    grid = " ".join(help_page(("predict",)).split("--grid GXxGYxGZ")[1].split("--ranks")[0].split())
    assert "--data-parallel" not in grid and "--batch-size" not in grid
    assert grid.startswith("Process grid of GX*GY*GZ ranks")
