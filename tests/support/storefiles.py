"""Where a local store keeps its chunks: gtool.store.layout.CHUNK_KEYS names them ARRAY/c.I[.J]."""

from __future__ import annotations

import re
from pathlib import Path

CHUNK_KEY = re.compile(r"(.+)/c\.\d+(\.\d+)*")
"""A chunk's path in a store: its array's path, then c.I[.J...]."""


def array_chunks(array: Path) -> list[Path]:
    """The chunk files of the array stored in folder `array`."""
    return sorted(array.glob("c.*"))
