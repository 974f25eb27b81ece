"""What every gtool command shares: the console and clean reporting of user errors."""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gtool.errors import ENDED_BY, GtoolError, InterruptedWhenDone, Terminated
from gtool.trainer import end_now

F = TypeVar("F", bound=Callable[..., Any])

console = Console(stderr=True)


def reports_errors(command: F) -> F:
    """Print a GtoolError as one red line (no traceback) and exit with status 2; Ctrl-C exits 130, SIGTERM
    (where the command turns it into Terminated) 143; either exits 0 once the work was complete (the command
    turns it into InterruptedWhenDone), saying so."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except GtoolError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except InterruptedWhenDone as exc:
            console.print(
                f"[bold]notice:[/] {escape(str(exc))}; exit status 0", highlight=False, soft_wrap=True
            )
            ignore_signals_at_exit()  # a second Ctrl-C while the interpreter exits cannot undo the 0
            raise typer.Exit(0) from None
        except Terminated:
            console.print(f"[bold red]{ENDED_BY[signal.SIGTERM]}[/]")
            raise typer.Exit(128 + signal.SIGTERM) from None
        except KeyboardInterrupt:
            console.print(f"[bold red]{ENDED_BY[signal.SIGINT]}[/]")
            raise typer.Exit(128 + signal.SIGINT) from None
        except EOFError as exc:  # typer would print only "Aborted." (it takes it for a prompt's end of input)
            raise RuntimeError(f"unexpected end of data: {exc}") from exc

    return wrapper  # type: ignore[return-value]


_final = False


def ignore_signals_at_exit() -> None:
    """The command's work is done and reported: in the `gtool` program, SIGTERM and SIGINT are ignored from
    its end on, while the interpreter shuts down (~0.2 s), so that they cannot turn its status into 143."""
    global _final
    _final = True


def run(app: Callable[[], object]) -> None:
    """Run the `gtool` program's command line `app` and end the process as soon as it returns: ignoring
    signals from then on after a command that asked so, and without the interpreter's teardown (seconds,
    and at times a traceback of zarr's IO thread) unless a child process of the command still runs."""
    try:
        app()
    except SystemExit as done:
        status = done.code
        if isinstance(status, str):
            console.print(status, highlight=False, markup=False)
            status = 1
        if not _children():
            end_now(status or 0)
        raise
    finally:
        if _final:
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, signal.SIG_IGN)


def _children() -> list[int]:
    """The pids of this process's running children, but multiprocessing's resource tracker (which ends
    by itself with this process)."""
    from multiprocessing import resource_tracker

    import psutil

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return [child.pid for child in psutil.Process().children() if child.pid != tracker]
