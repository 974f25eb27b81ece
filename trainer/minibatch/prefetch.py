"""The next step's sample is cut while the current step trains: in a background thread on the CPU, and on
a side CUDA stream of that thread on a GPU (the step's stream waits for it before using the batch)."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from gtool.trainer.minibatch.batch import RankSampler, StepBatch

StepKey = tuple[int, int]
"""(epoch, global step)."""


class Prefetcher:
    """Hands out cuts of `sampler`, each prepared in the background while the previous one is used."""

    def __init__(self, sampler: RankSampler, seed: int, device: torch.device):
        self.sampler = sampler
        self.seed = seed
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gtool-sample")
        self.pending: tuple[StepKey, Future] | None = None
        self.waited = 0.0
        """Seconds `take` blocked for a cut since the last `reset_wait`."""
        self.cut_seconds = 0.0
        """Seconds the cuts took since the last `reset_wait` (mostly hidden behind the steps)."""

    def _cut(self, key: StepKey) -> tuple[StepBatch, torch.cuda.Event | None]:
        began = time.perf_counter()
        if self.stream is None:
            batch, event = self.sampler.cut(self.seed, *key), None
        else:
            with torch.cuda.stream(self.stream):
                batch = self.sampler.cut(self.seed, *key)
                event = torch.cuda.Event()
                event.record(self.stream)
        self.cut_seconds += time.perf_counter() - began
        return batch, event

    def take(self, key: StepKey, following: StepKey | None) -> StepBatch:
        """The cut of step `key` (prepared ahead when it was the one announced), then start `following`."""
        began = time.perf_counter()
        if self.pending is not None and self.pending[0] == key:
            batch, event = self.pending[1].result()
        else:
            if self.pending is not None:
                self.pending[1].result()
            batch, event = self._cut(key)
        self.pending = None
        if event is not None:
            torch.cuda.current_stream().wait_event(event)
            _used_on_current_stream(batch)
        self.waited += time.perf_counter() - began
        if following is not None:
            self.pending = (following, self.executor.submit(self._cut, following))
        return batch

    def reset_wait(self) -> None:
        self.waited = self.cut_seconds = 0.0

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def _used_on_current_stream(batch: StepBatch) -> None:
    """Tell the caching allocator that the batch's memory, made on the side stream, is used on this one."""
    stream = torch.cuda.current_stream()
    tensors = [t for m in batch.members.values() for t in (m.positions, m.indices)]
    tensors += [] if batch.features is None else [batch.features]
    for adjacency in batch.adjacency.values():
        for _, _, block in adjacency.blocks + adjacency.transpose_blocks:
            tensors += [block.crow_indices(), block.col_indices(), block.values()]
    for tensor in tensors:
        tensor.record_stream(stream)
