"""Where the tests find the repository and the project's shared datasets (absent from a user's clone)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORA = SHARED / "datasets" / "planetoid" / "cora"


def absent(path: Path) -> str:
    """A skip reason for a missing piece of ../shared, named as the repository sees it (not this machine's
    absolute path)."""
    return f"{os.path.relpath(path, REPO)} not found (../shared is only present in the project workspace)"
