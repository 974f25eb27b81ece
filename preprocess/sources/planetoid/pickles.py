"""A restricted unpickler for Planetoid's Python 2 pickles: numpy arrays, scipy CSR matrices, dicts of lists.

find_class admits only the exact classes those files name; anything else (os.system, ...) is refused with
an InputError before it is looked up. CSR matrices come back as their raw arrays, never as scipy objects
built by the pickle.
"""

from __future__ import annotations

import pickle
from collections import defaultdict
from typing import Any

import numpy as np
import scipy.sparse as sp

from gtool.errors import InputError


class PickledCsr:
    """What a pickled scipy csr_matrix turns into: its state dict, turned into a matrix by `to_csr`."""

    state: dict[str, Any]

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.state = state


_RECONSTRUCT = np.ndarray(0).__reduce__()[0]
ALLOWED: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("scipy.sparse.csr", "csr_matrix"): PickledCsr,
    ("scipy.sparse._csr", "csr_matrix"): PickledCsr,
    ("collections", "defaultdict"): defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles (latin1, as Python 2 wrote them) only what ALLOWED names."""

    def __init__(self, file: Any, where: str):
        super().__init__(file, encoding="latin1")
        self.where = where

    def find_class(self, module: str, name: str) -> Any:
        allowed = ALLOWED.get((module, name))
        if allowed is None:
            raise InputError(
                self.where,
                f"the pickle refers to {module}.{name}, which gtool refuses to load; expected only"
                " numpy arrays, scipy CSR matrices and dicts of lists",
            )
        return allowed


def load_restricted(path: str) -> Any:
    """The object pickled in `path`, loaded by RestrictedUnpickler."""
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, path).load()
    except InputError:
        raise
    except OSError as exc:
        raise InputError(path, f"cannot read the file ({exc})") from None
    except Exception as exc:  # a malformed pickle can fail in many ways
        raise InputError(path, f"not a readable Planetoid pickle ({type(exc).__name__}: {exc})") from None


def to_csr(obj: Any, where: str) -> sp.csr_matrix:
    """A CSR matrix from an unpickled PickledCsr, checked for the arrays and shape it needs."""
    state = getattr(obj, "state", None)
    if not isinstance(obj, PickledCsr) or not isinstance(state, dict):
        raise InputError(where, f"expected a pickled scipy CSR matrix, got {type(obj).__name__}")
    try:
        arrays = tuple(np.asarray(state[key]) for key in ("data", "indices", "indptr"))
        return sp.csr_matrix(arrays, shape=tuple(state["_shape"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(where, f"not a valid CSR matrix ({exc})") from None
