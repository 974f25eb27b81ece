"""High-water marks of a run, sampled in the background: memory of the whole process tree, spill on disk."""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

import psutil

SAMPLE_SECONDS = 0.25


def tree_rss(process: psutil.Process) -> int:
    """Resident bytes of a process and all its descendants (the local cluster's worker processes)."""
    total = 0
    for p in [process, *process.children(recursive=True)]:
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
    """Samples, every SAMPLE_SECONDS while open, the RSS summed over this process and its children and
    the bytes in the spill folder, keeping the largest of each."""

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
        while True:
            self.sample(me)
            if self._stop.wait(SAMPLE_SECONDS):
                return

    def sample(self, me: psutil.Process) -> None:
        self.peak_rss = max(self.peak_rss, tree_rss(me))
        self.peak_spill = max(self.peak_spill, folder_bytes(self.spill))

    @property
    def peak_rss_mb(self) -> float:
        """The sampled peak of the tree, and at least this process's own exact peak."""
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return max(self.peak_rss, own) / (1 << 20)
