"""docs/reference/ is what `python -m gtool.cli.reference docs/reference` writes from the commands' own help:
every argument and option of every command, with its value and default, and nothing else."""

from __future__ import annotations

import re

import pytest
import typer

from gtool.cli.help import is_argument, value_name
from gtool.cli.main import app
from gtool.cli.reference import pages, write
from tests.support.paths import REPO

FOLDER = REPO / "docs" / "reference"
REGENERATE = "docs/reference is out of date: run `python -m gtool.cli.reference docs/reference`"


def test_the_checked_in_reference_is_the_generated_one() -> None:
    wanted = pages()
    assert sorted(p.name for p in FOLDER.glob("*.md")) == sorted(wanted), REGENERATE
    for name, text in wanted.items():
        assert (FOLDER / name).read_text() == text, f"{name}: {REGENERATE}"


@pytest.mark.parametrize("name", [n for n in typer.main.get_command(app).commands if n != "cache"])
def test_every_option_of_a_command_is_on_its_page(name: str) -> None:
    command = typer.main.get_command(app).commands[name]
    page = pages()[f"{name}.md"]
    for param in command.params:
        if is_argument(param):
            assert f"| `{value_name(param)}` |" in page, (name, param.name)
        for flag in [] if is_argument(param) else param.opts + param.secondary_opts:
            assert re.search(rf"^\| `[^|]*(?<![\w-]){flag}\b", page, flags=re.M), (name, flag)


def test_write_replaces_the_pages_and_removes_stale_ones(tmp_path) -> None:
    (tmp_path / "gone.md").write_text("a command that no longer exists\n")
    write(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.md")) == sorted(pages())
