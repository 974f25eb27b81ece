"""What a checkpoint's manifest must hold before any rank uses it: values of the kinds and ranges gtool
writes, and a rank file for every rank of its grid, told from a listing of its folder (so that a crafted
grid of 10^9 ranks costs what the folder holds, not a geometry per rank)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from gtool.architecture import ModelConfig
from gtool.geometry.grid import PLACEMENTS

RANK_FILE = "rank-{:05d}.pt"
"""The name of rank R's file in a checkpoint's folder."""
NODES_AT_MOST = 10_000
"""More nodes than a cluster has: a grid that would span more is not read as one node's files."""
RANK_NAME = re.compile(r"rank-\d{5,}\.pt")
"""The names RANK_FILE gives."""


def _count(value: Any, least: int = 1) -> bool:
    """Whether `value` is an int (not a bool) of at least `least`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _counts(value: Any, length: int | None = None) -> bool:
    """Whether `value` is a list of positive ints (of `length` of them, when given)."""
    return isinstance(value, list) and all(map(_count, value)) and length in (None, len(value))


def shape_problem(manifest: dict[str, Any], required: tuple[str, ...]) -> str | None:
    """What is wrong with a manifest's values (the `required` shape keys missing, one of another kind or
    out of range, model options that are not gtool's), or None."""
    shape = manifest["shape"]
    missing = [key for key in ("grid", *required) if key not in shape]
    if missing:
        return f"no {', '.join(missing)} in its shape"
    checks = {
        "grid": lambda v: _counts(v, 3),
        "dims": lambda v: _counts(v) and len(v) >= 2,
        "num_nodes": _count,
        "placement": lambda v: v in PLACEMENTS,
        "batch_size": lambda v: v is None or _count(v),
        "data_parallel": _count,
        "transform_first": lambda v: isinstance(v, list) and all(isinstance(t, bool) for t in v),
    }
    for key, valid in checks.items():
        if key in shape and not valid(shape[key]):
            return f"shape {key} {json.dumps(shape[key])[:60]} is not a valid value"
    if "dims" in shape and len(shape.get("transform_first", shape["dims"][1:])) != len(shape["dims"]) - 1:
        return "shape transform_first does not give one order per layer of dims"
    if not _count(manifest.get("epoch"), 0):
        return f"epoch {json.dumps(manifest.get('epoch'))[:60]} is not a valid value"
    model = manifest.get("model")
    if model is not None:
        try:
            ModelConfig(**model)
        except (TypeError, ValueError) as exc:
            return f"model options: {exc}"
    return None


def _ranks_of(present: set[str]) -> list[int]:
    """The ranks whose files are among the file names `present`."""
    return sorted(int(name[5:-3]) for name in present if RANK_NAME.fullmatch(name))


def missing_rank_files(manifest: dict[str, Any]) -> str | None:
    """Which of the grid's rank files the checkpoint's folder lacks, or None; told from the files that are
    there (a listing), so that a grid of any size costs what the folder holds."""
    ranks = math.prod(manifest["shape"]["grid"])
    present = {p.name for p in Path(manifest["path"]).glob("rank-*.pt")}
    if ranks > len(present) + 5:  # too many to name
        return f"its grid of {ranks:,} ranks needs {ranks:,} rank files, the folder holds {len(present):,}"
    missing = [name for name in map(RANK_FILE.format, range(ranks)) if name not in present]
    if missing:
        return f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''} missing"
    return None


def missing_files_reason(manifest: dict[str, Any]) -> str:
    """Why a checkpoint's folder lacks rank files, as far as it tells: when it holds the files of one
    node's ranks (a block of them, of a size that divides the grid into at most NODES_AT_MOST blocks),
    they were written on a folder of each node's own; else it is damaged or incomplete."""
    held = _ranks_of({p.name for p in Path(manifest["path"]).glob("rank-*.pt")})
    ranks, size = math.prod(manifest["shape"]["grid"]), len(held)
    one_node = held == list(range(held[0], held[0] + size)) and held[0] % size == 0 if held else False
    if not one_node or ranks % size or ranks // size > NODES_AT_MOST:
        return "the checkpoint is damaged or incomplete"
    shown = f"rank {held[0]}" if size == 1 else f"ranks {held[0]}-{held[-1]}"
    return (
        f"the folder holds only the files of {shown}: it looks node-local (the other ranks' files on "
        "another node's own disk); copy them here, or train with a --checkpoint folder every node mounts"
    )
