"""Wall-clock accounting of one epoch by kind of work: SpMM, dense compute, communication, the residuals'
reshards, and the rest ("other": autograd's own passes, Python, the optimizer's bookkeeping).

Phases nest: a phase entered inside another pauses it (an all-reduce inside a fused norm kernel counts
as comm, not also as dense), so the phases never count a second twice and, with "other" the epoch's
wall time that no phase claimed, they add up to the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PHASES = ("spmm", "dense", "comm", "reshard", "other")
OTHER = "other"
"""The epoch's time outside every named phase (`PhaseTimer.totals`)."""


class PhaseTimer:
    """Accumulates seconds per phase since `reset`, and the wall time since then.

    On CUDA each region is timed with events on the current stream, so timing never synchronizes the
    device inside the epoch (which would serialize an SpMM block with the previous block's all-reduce);
    `totals()` synchronizes once and adds the events up.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self) -> None:
        """Start a new count (an epoch): every phase at zero, the wall clock from now."""
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self.open: list[list] = []
        """The phases entered and not left, innermost last: [name, start time or event]."""
        self.began = time.perf_counter()

    def _mark(self) -> float | torch.cuda.Event:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _close(self, name: str, start: float | torch.cuda.Event) -> None:
        """Count the segment of `name` from `start` to now."""
        end = self._mark()
        if isinstance(start, float):
            assert isinstance(end, float)
            self.seconds[name] += end - start
        else:
            assert not isinstance(end, float)
            self.events.append((name, start, end))

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed block as `name` (pausing the phase it is nested in, if any)."""
        if name not in self.seconds or name == OTHER:
            raise ValueError(f"phase {name!r}: not one of {PHASES[:-1]}")
        if self.open:
            outer = self.open[-1]
            self._close(outer[0], outer[1])
        self.open.append([name, self._mark()])
        try:
            yield
        finally:
            _, start = self.open.pop()
            self._close(name, start)
            if self.open:
                self.open[-1][1] = self._mark()

    def totals(self) -> dict[str, float]:
        """Seconds per phase since `reset`, "other" the wall time no phase claimed (on CUDA: waits for
        the device, then reads the events)."""
        if self.events:
            torch.cuda.synchronize()
            for name, start, end in self.events:
                self.seconds[name] += start.elapsed_time(end) / 1000.0
            self.events = []
        wall = time.perf_counter() - self.began
        named = sum(seconds for name, seconds in self.seconds.items() if name != OTHER)
        self.seconds[OTHER] = max(0.0, wall - named)
        return dict(self.seconds)
