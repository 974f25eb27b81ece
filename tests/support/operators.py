"""Counting the aten operators a piece of work dispatches: equal counts on graphs of different sizes show
that no Python loop runs over nodes, rows or edges."""

from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

WAITS_FOR_DEVICE = {"aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.item"}


class OperatorLog(TorchDispatchMode):
    """Counts every aten operator dispatched while active (forward, backward and optimizer alike)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))
