"""docs/howto/own-model.md shows examples/stack.py as it is."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_shows_the_example_file() -> None:
    page = (ROOT / "docs" / "howto" / "own-model.md").read_text()
    (block,) = re.findall(r"^```python title=stack.py\n(.*?)^```$", page, flags=re.S | re.M)
    assert block == (ROOT / "examples" / "stack.py").read_text()
