"""High-water marks of a run, sampled in the background: memory of the whole process tree, spill on disk."""

from __future__ import annotations

import os
import resource
import threading
import time
from pathlib import Path
from typing import TypeVar

import psutil

SAMPLE_SECONDS = 0.5
LOOKUP_SECONDS = 2.0
"""How often the list of descendant processes is refreshed (finding them reads every process's status)."""
WALK_SPACING = 20
"""The spill folder is walked again once 20 times its last walk's duration has passed (5% of a core)."""

Sampler = TypeVar("Sampler", bound="TreePeak")


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


class TreePeak:
    """The peak RSS summed over a process and its descendants (Dask workers, torch.distributed ranks),
    sampled every `interval` seconds in a thread while open; the list of descendants is looked up again
    every `lookup` seconds (0: at every sample)."""

    def __init__(self, pid: int, interval: float = SAMPLE_SECONDS, lookup: float = LOOKUP_SECONDS):
        self.root = psutil.Process(pid)
        self.interval, self.lookup = interval, lookup
        self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gtool-tree-peak", daemon=True)

    def __enter__(self: Sampler) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        tree, looked_up = [self.root], -float("inf")
        while True:
            if time.monotonic() - looked_up >= self.lookup:
                try:
                    tree, looked_up = [self.root, *self.root.children(recursive=True)], time.monotonic()
                except psutil.Error:
                    return
            self.sample(tree)
            if self._stop.wait(self.interval):
                return

    def sample(self, tree: list[psutil.Process]) -> None:
        self.peak_rss = max(self.peak_rss, rss_sum(tree))

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss / (1 << 20)


class HighWater(TreePeak):
    """Samples, every SAMPLE_SECONDS while open, the RSS summed over this process and its descendants
    and the bytes in the spill folder, keeping the largest of each."""

    def __init__(self, spill: Path):
        super().__init__(os.getpid())
        self.spill = spill
        self.peak_spill = 0
        self.walk_due = 0.0

    def sample(self, tree: list[psutil.Process]) -> None:
        """The RSS at every sample; the spill folder's bytes when its last walk is WALK_SPACING times its
        own duration ago, so that walking it takes a bounded share of a core however many files it holds
        (a store of T x T tiles spills O(T^2) files: walked every 0.5 s, the cost grew as T^2 x the run)."""
        super().sample(tree)
        started = time.monotonic()
        if started < self.walk_due:
            return
        self.peak_spill = max(self.peak_spill, folder_bytes(self.spill))
        self.walk_due = started + WALK_SPACING * (time.monotonic() - started)

    @property
    def peak_rss_mb(self) -> float:
        """The sampled peak of the tree, and at least this process's own exact peak."""
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return max(self.peak_rss, own) / (1 << 20)
