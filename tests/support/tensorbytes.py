"""Measured tensor memory of a process: the bytes of every live tensor storage, and their peak.

`LiveTensorBytes` counts the storages alive when it starts (found through the garbage collector, sparse
tensors by their index and value arrays) and, while active as a TorchDispatchMode, every storage an
operator returns (forward and backward alike). A storage stops counting when it is freed, which a weak
reference on the storage object observes: autograd keeps saved tensors' storages alive, so they count
until backward releases them. This is what `gtool plan`'s memory model is checked against on the CPU
(on CUDA, torch.cuda.max_memory_allocated says the same).
"""

from __future__ import annotations

import gc
import warnings
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

SPARSE_PARTS = {
    torch.sparse_csr: ("crow_indices", "col_indices", "values"),
    torch.sparse_coo: ("_indices", "_values"),
}


class LiveTensorBytes(TorchDispatchMode):
    """Live tensor-storage bytes (`current`) and their maximum since the mode started (`peak`)."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def __enter__(self) -> LiveTensorBytes:
        gc.collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
        for tensor in tensors:
            self.track(tensor)
        self.peak = self.current
        return super().__enter__()

    def track(self, tensor: torch.Tensor) -> None:
        """Count the storage(s) behind `tensor` if they are not counted yet."""
        parts = SPARSE_PARTS.get(tensor.layout)
        if parts is not None:
            for name in parts:
                self.track(getattr(tensor, name)())
            return
        if tensor.layout != torch.strided or tensor.device.type == "meta":
            return
        storage = tensor.untyped_storage()
        pointer, nbytes = storage.data_ptr(), storage.nbytes()
        if nbytes == 0 or pointer in self.live:
            return
        self.live[pointer] = nbytes
        self.current += nbytes
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._freed, pointer)

    def _freed(self, pointer: int) -> None:
        self.current -= self.live.pop(pointer, 0)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self.track(item)
        return out
