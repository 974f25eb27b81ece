"""Every page's examples run as written (the forms: tests/docs/examples.py): the bash and Python blocks of
a page in page order, in a folder of its own. docs/python.md runs in test_python_examples.py (twice, with
its printed values checked); pages that shard Cora skip when the project's copy is absent (never
downloaded here). The heaviest pages train Cora for 200 epochs (train.md, howto/real-dataset.md) and the
README's demo on 2x2x2 (tutorial.md)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import pytest

from tests.docs.examples import Block, blocks, name, pages, run_script, unfenced_commands
from tests.support.paths import CORA, REPO

RUN_ELSEWHERE = {"docs/python.md": "test_python_examples.py runs it twice, checking what it prints"}
BLOCK_TIMEOUT = 600


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_example_is_fenced_and_marked(page: Path) -> None:
    for block in blocks(page):  # raises on an unknown form
        assert block.lang != "text" or block.title is None, f"{name(page)}:{block.line}: text has no title"
    assert unfenced_commands(page) == [], f"{name(page)}: fence these (tests/docs/examples.py)"


def runnable_pages() -> list[Path]:
    """Pages with a block to run (a page the lint refuses runs nothing until it is fixed)."""
    return [p for p in pages() if name(p) not in RUN_ELSEWHERE and has_runnable_blocks(p)]


def has_runnable_blocks(page: Path) -> bool:
    try:
        return any(block.runs and block.title is None for block in blocks(page))
    except ValueError:
        return False


def environment() -> dict[str, str]:
    """This interpreter's `python` and `gtool` first on PATH, this checkout importable, Cora's parent folder
    as GTOOL_DATA (`gtool shard cora` finds it there instead of downloading it)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["GTOOL_DATA"] = str(CORA.parent.parent)
    return env


def run_bash(block: Block, folder: Path, env: dict[str, str], where: str) -> None:
    status, output = run_script(block.body, env, BLOCK_TIMEOUT, folder)
    assert status == 0, f"{where} exited {status}:\n{output}"


def run_page(page: Path, folder: Path) -> str:
    """Run the page's blocks in order in `folder` (the current folder); what its Python blocks printed."""
    env = environment()
    namespace: dict[str, object] = {}
    printed = io.StringIO()
    for block in blocks(page):
        where = f"{name(page)}:{block.line}"
        if not block.runs:
            continue
        if block.title is not None:
            (folder / block.title).write_text(block.body)
        elif block.lang == "bash":
            run_bash(block, folder, env, where)
        else:
            with contextlib.redirect_stdout(printed):
                exec(compile(block.body, where, "exec"), namespace)
    return printed.getvalue()


@pytest.mark.integration  # runs the command line
@pytest.mark.parametrize("page", runnable_pages(), ids=name)
def test_the_page_runs_as_written(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "gtool shard cora" in page.read_text() and not CORA.is_dir():
        pytest.skip(f"the page shards Cora, and {CORA} is absent")
    monkeypatch.chdir(tmp_path)
    run_page(page, tmp_path)
