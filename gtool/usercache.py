"""This user's cache folder of what gtool measures once per machine (gtool plan's profile, --grid auto's
trials): the same wherever a command runs, so that another working folder does not measure again."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache() -> Path:
    """$GTOOL_CACHE, else $XDG_CACHE_HOME/gtool, else ~/.cache/gtool."""
    if given := os.environ.get("GTOOL_CACHE"):
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "gtool"
