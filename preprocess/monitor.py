"""High-water marks of a run, sampled in the background: memory of the whole process tree, spill on disk."""

from __future__ import annotations

import os
import resource
import threading
import time
from pathlib import Path

import psutil

SAMPLE_SECONDS = 0.5
LOOKUP_SECONDS = 2.0
"""How often the list of descendant processes is refreshed (finding them reads every process's status)."""


def rss_sum(processes: list[psutil.Process]) -> int:
    """Resident bytes of some processes (those that ended count 0)."""
    total = 0
    for p in processes:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under a folder that is being written to and cleaned as we look."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


class HighWater:
    """Samples, every SAMPLE_SECONDS while open, the RSS summed over this process and its descendants
    and the bytes in the spill folder, keeping the largest of each."""

    def __init__(self, spill: Path):
        self.spill = spill
        self.peak_rss = 0
        self.peak_spill = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gtool-highwater", daemon=True)

    def __enter__(self) -> HighWater:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        me = psutil.Process()
        tree, looked_up = [me], 0.0
        while True:
            if time.monotonic() - looked_up > LOOKUP_SECONDS:
                tree, looked_up = [me, *me.children(recursive=True)], time.monotonic()
            self.peak_rss = max(self.peak_rss, rss_sum(tree))
            self.peak_spill = max(self.peak_spill, folder_bytes(self.spill))
            if self._stop.wait(SAMPLE_SECONDS):
                return

    @property
    def peak_rss_mb(self) -> float:
        """The sampled peak of the tree, and at least this process's own exact peak."""
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return max(self.peak_rss, own) / (1 << 20)
