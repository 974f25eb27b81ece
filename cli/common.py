"""What every gtool command shares: the console and clean reporting of user errors."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.text import Text

from gtool.collector import hold
from gtool.errors import ENDED_BY, GtoolError, InterruptedWhenDone, signum_of
from gtool.interrupts import SIGNALS, end_now
from gtool.terminal import QUIET_ENV, labelled, plain_console

F = TypeVar("F", bound=Callable[..., Any])

console = plain_console(stderr=True)
"""Diagnostics: progress, notices, errors (stderr)."""
out = plain_console()
"""Results: what the command was asked for (stdout, so that `gtool info STORE > f` writes it to f)."""


def _quiet(value: bool) -> bool:
    """-q holds for the command's every process: its ranks and workers say nothing either."""
    if value:
        os.environ[QUIET_ENV] = "1"
    return value


QUIET = typer.Option(
    False, "--quiet", "-q", help="No progress: only the result and any error.", callback=_quiet
)
"""-q of every command that shows progress."""


def reports_errors(command: F) -> F:
    """Print a GtoolError as one red line (no traceback) and exit with status 2; Ctrl-C exits 130, SIGTERM
    and SIGHUP (where the command turns them into Terminated) 143 and 129; each exits 0 once the work was
    complete (the command turns it into InterruptedWhenDone), saying so."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except GtoolError as exc:
            print_error(str(exc))
            tell_waiting_ranks(str(exc))
            raise typer.Exit(2) from None
        except InterruptedWhenDone as exc:
            console.print(labelled("notice:", "bold", f"{exc}; exit status 0"), soft_wrap=True)
            ignore_signals_at_exit()  # a second Ctrl-C while the interpreter exits cannot undo the 0
            raise typer.Exit(0) from None
        except KeyboardInterrupt as ended:  # Terminated too
            signum = signum_of(ended)
            console.print(Text(ENDED_BY[signum], style="bold red"))
            raise typer.Exit(128 + signum) from None
        except EOFError as exc:  # typer would print only "Aborted." (it takes it for a prompt's end of input)
            raise RuntimeError(f"unexpected end of data: {exc}") from exc

    return wrapper  # type: ignore[return-value]


def tell_waiting_ranks(message: str) -> None:
    """Under torchrun or srun, this rank's refusal goes to the rendezvous, where the ranks that wait for it
    to join (another node's) read it and end at once (gtool.trainer.launch.rendezvous); torch is imported
    only then."""
    from gtool.trainer import environment_rank

    try:
        env = environment_rank()
    except GtoolError:
        return
    if env is not None and env.world_size > 1:
        from gtool.trainer import tell_peers

        tell_peers(message)


def print_error(message: str) -> None:
    """The one `error:` line of a refusal, its message printed as given."""
    console.print(labelled("error:", "bold red", message), soft_wrap=True)


_program = False
"""Set by `run`: this process is the `gtool` program (not a test invoking a command's function)."""


def ignore_signals_at_exit() -> None:
    """The command's work is done and reported: in the `gtool` program, SIGTERM, SIGINT and SIGHUP are
    ignored from now on, while the command returns and the process ends, so that they cannot turn its
    status into 143, 130, 129 or click's 'Aborted!' (1)."""
    if _program:
        for number in SIGNALS:
            signal.signal(number, signal.SIG_IGN)


def run(app: Callable[[], object]) -> None:
    """Run the `gtool` program's command line `app` and end the process as soon as it returns: ignoring
    and without the interpreter's teardown (seconds,
    and at times a traceback of zarr's IO thread) unless a child process of the command still runs or a
    profiler or tracer watches the process."""
    global _program
    _program = True
    hold()  # the command's imports run without the garbage collector (gtool.collector)
    try:
        app()
    except SystemExit as done:
        status = done.code
        if isinstance(status, str):
            console.print(status, highlight=False, markup=False)
            status = 1
        if not _children() and sys.getprofile() is None and sys.gettrace() is None:
            end_now(status or 0)  # a profiler or coverage (a tracer) writes its report at exit
        raise


def _children() -> list[int]:
    """The pids of this process's running children, but multiprocessing's resource tracker (which ends
    by itself with this process)."""
    from multiprocessing import resource_tracker

    import psutil

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return [child.pid for child in psutil.Process().children() if child.pid != tracker]
