"""How many cores this process may run on (its CPU affinity where the platform tells, else all)."""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may use: its affinity set (containers, taskset, srun bindings), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
