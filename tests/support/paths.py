"""Where the tests find the repository and the project's shared datasets (absent from a user's clone)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORA = SHARED / "datasets" / "planetoid" / "cora"
