"""OGB's torch-saved files (meta_dict.pt, split_dict.pt), read with torch's weights-only unpickler."""

from __future__ import annotations

import re
import zipfile
from typing import Any

import numpy as np

from gtool.errors import InputError

_NUMERIC_DTYPES = (
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
)
_WEIGHTS_ONLY_ERROR = re.compile(r"WeightsUnpickler error:\s*([^\n]+)")


def numpy_globals() -> list[Any]:
    """What a pickled numeric numpy array refers to (numpy 1 and 2 spellings), and nothing else."""
    reconstruct = np.ndarray(0).__reduce__()[0]
    dtype_classes = [type(np.dtype(t)) for t in _NUMERIC_DTYPES]
    numpy1_name = (reconstruct, "numpy.core.multiarray._reconstruct")
    return [reconstruct, numpy1_name, np.ndarray, np.dtype, *dtype_classes]


def load_pt(path: str) -> Any:
    """The object in a torch .pt file, unpickled with weights_only=True: builtins, tensors, numeric arrays."""
    import torch

    try:
        with torch.serialization.safe_globals(numpy_globals()):
            return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises many types for unreadable or unsafe files
        found = _WEIGHTS_ONLY_ERROR.search(str(exc))
        reason = found.group(1).strip() if found else next(iter(str(exc).strip().splitlines()), "")
        reason = reason or type(exc).__name__
        if not zipfile.is_zipfile(path):
            reason = f"not a torch.save archive, perhaps a plain pickle ({reason})"
        problem = f"cannot read it with torch.load(weights_only=True): {reason}"
        expected = "expected builtins, tensors or numeric arrays (gtool loads no arbitrary pickles)"
        raise InputError(path, f"{problem}; {expected}") from None
