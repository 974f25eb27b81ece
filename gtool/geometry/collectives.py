"""The names of the collectives the trainer issues and the plan predicts (`comm_bytes` in the log)."""

from __future__ import annotations

from gtool.geometry.grid import AXES

DATA = "data"
"""The group of the ranks that hold the same part in the D replicas of the grid (--data-parallel)."""
GROUPS = (*AXES, "all", DATA)
"""Group names: the three grid axes, every rank of the run (or of its replica of the grid: a residual's
all-to-all), and the replicas of a rank's part."""
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
"""Collective kinds, in the order `comm_bytes` lists them."""
