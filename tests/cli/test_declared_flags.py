"""Flags made from declarations (gtool.cli.options): a switch takes no value, one whose default is decided
later is --x/--no-x, a parsed value is refused in one error line naming the flag."""

from __future__ import annotations

from dataclasses import dataclass

import typer
from typer.testing import CliRunner

from gtool.cli.common import reports_errors
from gtool.cli.help import App
from gtool.cli.options import made, with_options
from gtool.options import Options, option
from gtool.preprocess.options import square_tiles


@dataclass(frozen=True)
class Toy(Options):
    fused: bool | None = option(None, "Fuse the passes (default: where it is faster).")
    verbose: bool = option(False, "Say more.")
    tiles: int = option(4, "Tile grid.", parse=square_tiles, metavar="TxT", shown_default="4x4", minimum=1)


def toy_app() -> App:
    app = App()

    @app.command("toy")
    @reports_errors
    @with_options(Toy)
    def toy(**flags: object) -> None:
        typer.echo(repr(made(Toy, **flags)))

    @app.command("other")
    def other() -> None:
        """A second command, so that `toy` is a subcommand."""

    return app


def test_a_switch_decided_later_is_on_off_and_no_switch_shows_a_type() -> None:
    page = CliRunner().invoke(toy_app(), ["toy", "--help"]).output
    assert "--fused / --no-fused  " in page and "--verbose  " in page
    assert "--tiles TxT" in page and "[default: 4x4]" in page and "<bool>" not in page


def test_the_values_reach_the_options_parsed() -> None:
    app = toy_app()
    assert CliRunner().invoke(app, ["toy"]).output == "Toy(fused=None, verbose=False, tiles=4)\n"
    given = CliRunner().invoke(app, ["toy", "--no-fused", "--verbose", "--tiles", "8x8"]).output
    assert given == "Toy(fused=False, verbose=True, tiles=8)\n"


def test_a_value_that_does_not_parse_is_one_error_line() -> None:
    result = CliRunner().invoke(toy_app(), ["toy", "--tiles", "8x4"])
    assert result.exit_code == 2
    assert result.output == "error: --tiles must be square (T x T, store layout v1), got 8x4\n"
