"""A check that runs on a thread of its own while a block is open: the cluster's watches of its workers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def watching(name: str, watch: Callable[..., None], *args: Any) -> Iterator[None]:
    """Run `watch(*args, stopping)` on a daemon thread named `name` while the block is open; on leaving,
    set `stopping` and wait for the thread to end."""
    stopping = threading.Event()
    thread = threading.Thread(target=watch, args=(*args, stopping), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join()
