"""Wall-clock accounting of one epoch by kind of work: SpMM, dense compute, communication."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PHASES = ("spmm", "dense", "comm")


class PhaseTimer:
    """Accumulates seconds per phase; on CUDA it synchronizes around each timed region."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed block as `name`."""
        if self.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.cuda:
                torch.cuda.synchronize()
            self.seconds[name] += time.perf_counter() - start
