"""How a command's failures reach the user: an unexpected EOFError (a truncated file read inside a task) is
an unexpected error with its traceback, not typer's bare "Aborted." (its take on a prompt's end of input)."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from gtool.cli.common import reports_errors


def test_an_unexpected_end_of_data_is_not_taken_for_an_aborted_prompt():
    app = typer.Typer()

    @app.command()
    @reports_errors
    def reads() -> None:
        raise EOFError("No data left in file")

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 1
    assert "Aborted" not in result.output
    assert isinstance(result.exception, RuntimeError)
    assert "unexpected end of data: No data left in file" in str(result.exception)
