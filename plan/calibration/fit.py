"""Least-squares fits of measured seconds, shared by the microbenchmarks and the epoch calibration."""

from __future__ import annotations

import numpy as np
import scipy.optimize


def fit_relative(rows: list[list[float]], seconds: list[float]) -> np.ndarray:
    """Non-negative least squares of relative errors: seconds ~ rows @ coefficients."""
    system = np.array(rows, dtype=float) / np.array(seconds)[:, None]
    return scipy.optimize.nnls(system, np.ones(len(seconds)))[0]
