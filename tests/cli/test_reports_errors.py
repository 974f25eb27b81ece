"""How a command's failures reach the user: an unexpected EOFError (a truncated file read inside a task) is
an unexpected error with its traceback, not typer's bare "Aborted." (its take on a prompt's end of input);
SIGTERM or SIGHUP during training is said, with its own status."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner, Result

from gtool import interrupts
from gtool.cli import common
from gtool.cli.common import reports_errors
from gtool.cli.main import app
from gtool.errors import InterruptedWhenDone, Terminated
from gtool.trainer.fit import train as run


def run_raising(error: BaseException) -> Result:
    """A one-command app, its command wrapped by reports_errors, run raising `error`."""
    app = typer.Typer()

    @app.command()
    @reports_errors
    def command() -> None:
        raise error

    return CliRunner().invoke(app, [])


def test_an_unexpected_end_of_data_is_not_taken_for_an_aborted_prompt():
    result = run_raising(EOFError("No data left in file"))
    assert result.exit_code == 1
    assert "Aborted" not in result.output
    assert isinstance(result.exception, RuntimeError)
    assert "unexpected end of data: No data left in file" in str(result.exception)


def test_a_signal_once_the_work_is_done_exits_0_and_no_later_signal_changes_that(monkeypatch) -> None:
    """In the `gtool` program, signals are ignored from then on: one that came while click returned
    ended the process with 'Aborted!' and status 1, after the store was published."""
    monkeypatch.setattr(common, "_program", True)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        result = run_raising(InterruptedWhenDone("SIGINT came after the store S"))
        assert result.exit_code == 0
        assert "notice: SIGINT came after the store S; exit status 0" in result.output
        assert all(signal.getsignal(number) == signal.SIG_IGN for number in handlers)
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


@pytest.mark.parametrize(("sent", "said"), [(signal.SIGTERM, "terminated"), (signal.SIGHUP, "hung up")])
def test_sigterm_or_sighup_during_training_says_so_and_exits_with_its_status(
    monkeypatch, sent: int, said: str
) -> None:
    """SIGTERM (a scheduler's, docker stop) ended `gtool train` without a word; its ranks noticed later."""
    store = SimpleNamespace(num_nodes=10, check_every_chunk=lambda: None)
    monkeypatch.setattr("gtool.store.reader.open_store", lambda path: store)  # imported when run
    monkeypatch.setattr("gtool.cli.train.budgeted", lambda config, opened, launched: config)

    def terminated(config, started) -> None:
        raise Terminated(f"terminated by {signal.Signals(sent).name}", sent)

    monkeypatch.setattr(run, "train", terminated)
    result = CliRunner().invoke(app, ["train", "graph.zarr"])
    assert result.exit_code == 128 + sent
    assert f"{said}: the latest complete checkpoint (if any) can be resumed" in result.output


def test_sigterm_during_verify_says_so_and_exits_143(monkeypatch) -> None:
    def signalled(*args) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # handled in this (the main) thread before kill returns

    monkeypatch.setattr(interrupts, "GRACE_SECONDS", 1e6)  # its watchdog would end pytest itself
    monkeypatch.setattr("gtool.store.reader.open_store", lambda path: SimpleNamespace())  # imported when run
    monkeypatch.setattr("gtool.store.verify.store_arrays", lambda store: {})
    monkeypatch.setattr("gtool.store.verify.verify_store", signalled)
    result = CliRunner().invoke(app, ["verify", "graph.zarr"])
    assert result.exit_code == 143 and "terminated" in result.output
