"""The store's metadata (attributes["gtool"], docs/store-format.md): the per-matrix tile statistics."""

from __future__ import annotations

from typing import Any

import numpy as np


def spread(values: np.ndarray) -> dict[str, float]:
    """min / mean / max / max-over-mean of some counts (max/mean 0 when they are all 0)."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    mean = float(flat.mean()) if flat.size else 0.0
    top = float(flat.max()) if flat.size else 0.0
    return {
        "min": int(flat.min()) if flat.size else 0,
        "mean": mean,
        "max": int(top),
        "max_over_mean": top / mean if mean else 0.0,
    }


def tile_stats(tile_nnz: np.ndarray) -> dict[str, Any]:
    """The spread of a T x T count array plus its coefficient of variation, empty tiles and the counts."""
    flat = tile_nnz.ravel().astype(np.float64)
    mean = float(flat.mean()) if flat.size else 0.0
    return {
        **spread(flat),
        "cv": float(flat.std() / mean) if mean else 0.0,
        "empty": int((flat == 0).sum()),
        "tile_nnz": tile_nnz.astype(int).tolist(),
    }
