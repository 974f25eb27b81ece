"""Wall-clock accounting of one epoch by kind of work: SpMM, dense compute, communication."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PHASES = ("spmm", "dense", "comm")


class PhaseTimer:
    """Accumulates seconds per phase.

    On CUDA each region is timed with events on the current stream, so timing never synchronizes the
    device inside the epoch (which would serialize an SpMM block with the previous block's all-reduce);
    `totals()` synchronizes once and adds the events up.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.events = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed block as `name`."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end.record()
                self.events.append((name, start, end))
            return
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - began

    def totals(self) -> dict[str, float]:
        """Seconds per phase so far (on CUDA: waits for the device, then reads the events)."""
        if self.events:
            torch.cuda.synchronize()
            for name, start, end in self.events:
                self.seconds[name] += start.elapsed_time(end) / 1000.0
            self.events = []
        return dict(self.seconds)
