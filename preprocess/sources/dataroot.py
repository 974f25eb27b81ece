"""Where datasets named on the command line (OGB, Planetoid) are looked for and downloaded to."""

from __future__ import annotations

import os


def default_root() -> str:
    """$GTOOL_DATA, else ./data."""
    return os.environ.get("GTOOL_DATA") or "./data"
