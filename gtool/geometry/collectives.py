"""The names of the collectives the trainer issues and the plan predicts (`comm_bytes` in the log)."""

from __future__ import annotations

from gtool.geometry.grid import AXES

GROUPS = (*AXES, "all")
"""Group names: the three grid axes, and every rank of the grid."""
KINDS = ("all_reduce", "all_gather", "reduce_scatter")
"""Collective kinds, in the order `comm_bytes` lists them."""
