"""The consoles gtool prints with: text printed as given, styles only from rich Text objects.

Paths, sources and messages hold user text: a file named `a:smile:b.txt` or `[red].txt`, a source
`rmat:abc:`. A console with markup and emoji codes would rewrite them, so none of gtool's does.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn, TextColumn
from rich.text import Text

UNWRAPPED = 10_000
"""The width of a console that is not a terminal (a pipe, a file) and is given none ($COLUMNS unset): lines
are not wrapped at rich's 80 columns, tables keep their rows whole and take the width they need."""

QUIET_ENV = "GTOOL_QUIET"
"""Set by a command's -q for its every process (ranks, workers): their notices are not shown."""


def plain_console(stderr: bool = False, **options: Any) -> Console:
    """A console (stdout, or stderr) that applies no markup, emoji codes or highlighting to what it prints;
    not a terminal, it wraps nothing (UNWRAPPED) unless given a width or $COLUMNS."""
    console = Console(stderr=stderr, markup=False, emoji=False, highlight=False, **options)
    if "width" not in options and "COLUMNS" not in os.environ and not console.is_terminal:
        console.width = UNWRAPPED
    return console


def labelled(label: str, style: str, text: str) -> Text:
    """`label text` with the label styled and the text as given (e.g. a red 'error:')."""
    return Text.assemble((label, style), " ", text)


def description_column(width: int = 0, style: str = "bold") -> TextColumn:
    """A progress bar's description, as given (no markup or emoji codes), padded to `width`."""
    return TextColumn(
        f"{{task.description:<{width}}}" if width else "{task.description}", style=style, markup=False
    )


def transient_progress(console: Console, *columns: ProgressColumn, shown: bool = True) -> Progress:
    """A progress display that vanishes once done, drawn only on a terminal: in a pipe or a file rich would
    leave a blank line, and nothing else of it."""
    return Progress(*columns, console=console, transient=True, disable=not shown or not console.is_terminal)
