"""This user's cache folder of what gtool makes once per machine (gtool plan's profile, --grid auto's
trials, the compiled kernels): the same wherever a command runs, so that another working folder does not
measure or compile again."""

from __future__ import annotations

import os
from pathlib import Path

KERNELS = "numba"
"""The folder of the cache that holds the compiled CPU kernels (gtool.compiled)."""
CACHE_ENV = "GTOOL_CACHE"
"""The variable naming gtool's cache folder (also of `gtool shard`'s copies of compressed inputs)."""


def user_cache() -> Path:
    """$GTOOL_CACHE, else $XDG_CACHE_HOME/gtool, else ~/.cache/gtool."""
    if given := os.environ.get(CACHE_ENV):
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "gtool"
