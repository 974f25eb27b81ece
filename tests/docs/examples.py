"""The examples of the user docs (README.md and docs/**.md), as tests/docs/test_examples.py runs them.

Every example is a fenced block, and its info string says what the test does with it:

    ```bash                     run, as a bash script (-e), in a folder of the page's own
    ```python                   run, in one Python namespace per page, in the same folder
    ```python title=FILE        written to FILE in that folder (for a later block to run)
    ```bash not-run: REASON     shown, not run: REASON says why (a GPU, many machines, a download, ...)
    ```python not-run: REASON   the same for Python
    ```text                     output or a layout, not run

The blocks of a page run in page order, so a later block finds what an earlier one wrote. A command
outside a fence (an indented `gtool ...` line) is an example no test would run: the lint refuses it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
INFO = re.compile(r"^(?P<lang>bash|python|text)(?: title=(?P<title>\S+)| not-run: (?P<reason>\S.*))?$")
COMMAND = re.compile(r"^ {4,}(?:\$ )?(?:gtool|python|torchrun|srun|pip|dask|bench/\S+)\s.*$", re.M)
"""An indented line that starts with a command: an example outside a fence."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    lang: str
    body: str
    line: int
    title: str | None = None
    reason: str | None = None

    @property
    def runs(self) -> bool:
        return self.lang in ("bash", "python") and self.reason is None


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, in order; a block whose info string is not one of the module's forms is a
    ValueError naming its line."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        info = INFO.match(match.group("info").strip())
        if info is None:
            form = match.group("info")
            raise ValueError(f"{name(page)}:{line}: ```{form} is not a form tests/docs/examples.py knows")
        body = textwrap.dedent(match.group("body"))  # a block inside a list item is indented
        found.append(Block(info["lang"], body, line, info["title"], info["reason"]))
    return found


def unfenced_commands(page: Path) -> list[str]:
    """Indented command lines outside the page's fences."""
    outside = FENCE.sub("", page.read_text())
    return [line.strip() for line in COMMAND.findall(outside)]


def run_script(script: str, env: dict[str, str], timeout: float, cwd: Path | None = None) -> tuple[int, str]:
    """`script` run by bash -e -o pipefail in a session of its own: its exit status and output (stderr
    with stdout); whatever it left running is ended."""
    process = subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, output
