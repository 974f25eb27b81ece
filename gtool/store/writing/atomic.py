"""A file written whole or not at all: a temporary file beside it (`DEST.partial-PID`), renamed into place."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO


def write_atomically(
    dest: str, write: Callable[[BinaryIO], object], before_rename: Callable[[str], object] | None = None
) -> str:
    """Write `dest` through a temporary file renamed into place, so a failed write leaves no partial dest;
    `before_rename(temporary path)` is called once it is written (to lock it: the lock goes with the
    rename, so no other process finds `dest` unlocked)."""
    tmp = f"{dest}.partial-{os.getpid()}"
    try:
        with open(tmp, "wb") as out:
            write(out)
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest
