"""`gtool shard` runs as a user starts them, and what they leave beside their output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LOCKED = "another gtool shard run is writing this output"
"""What a second run on a locked output is told."""


def leftovers(folder: Path) -> list[str]:
    """The hidden entries of `folder`: a run's partial store, lock, spill folder."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def start_shard(
    out: Path, source: str = "rmat:17:8", workers: int = 1, own_group: bool = False
) -> subprocess.Popen:
    """`gtool shard SOURCE -o OUT` in a process of its own (4x4 tiles, quiet; one worker, a thread, or
    worker processes), stderr piped; with `own_group`, leading a process group of its own (setsid)."""
    cmd = [
        sys.executable,
        "-m",
        "gtool.cli",
        "shard",
        source,
        "-o",
        str(out),
        "--tiles",
        "4x4",
        "-q",
        "-w",
        str(workers),
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=own_group
    )
