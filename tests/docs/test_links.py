"""Every relative link of README.md and docs/ leads somewhere: to a file of the repository and, with
`#anchor`, to a heading of that page (GitHub's anchors: lower case, punctuation dropped, spaces to
hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.examples import FENCE, name, pages

LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {anchor(match) for match in re.findall(r"^#+ (.*)$", text, flags=re.M)}


def broken_links(page: Path) -> list[str]:
    broken = []
    for match in LINK.finditer(FENCE.sub("", page.read_text())):
        target = match.group("target")
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        page_anchor = fragment and destination.suffix == ".md"
        if not destination.exists() or (page_anchor and fragment not in anchors(destination)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_anchors_are_githubs() -> None:
    assert anchor('Metadata: `attributes["gtool"]`') == "metadata-attributesgtool"
    assert anchor("Mini-batch training and 4D parallelism") == "mini-batch-training-and-4d-parallelism"
    assert anchor("`--grid auto` times the close grids") == "--grid-auto-times-the-close-grids"
