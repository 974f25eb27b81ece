"""A network's parameters as a checkpoint keeps them: each rank's flat parts by name (its state_dict),
and where each part's block lies in the whole parameter (its `Place` and full shape), so that a rank of
another grid can rebuild what it needs (checkpoints.regrid)."""

from __future__ import annotations

from typing import Any

import torch

from gtool.geometry.bands import Band
from gtool.trainer.models.network import placed_parameters
from gtool.trainer.nn.sharded import Place


def _band(band: Band | None) -> list[int] | None:
    return None if band is None else [band.index, band.start, band.stop, band.size]


def _unband(values: list[int] | None) -> Band | None:
    return None if values is None else Band(*values)


def place_record(place: Place, full_shape: tuple[int, ...]) -> dict[str, Any]:
    """A place as plain values (what torch.load(weights_only=True) reads back)."""
    return {
        "rows": _band(place.rows),
        "cols": _band(place.cols),
        "axis": place.axis,
        "shape": list(full_shape),
    }


def recorded_place(record: dict[str, Any]) -> tuple[Place, tuple[int, ...]]:
    """The place and full shape of `place_record`."""
    cols = _unband(record["cols"])
    assert cols is not None
    return Place(_unband(record["rows"]), cols, record["axis"]), tuple(record["shape"])


def model_state(network: torch.nn.Module) -> dict[str, Any]:
    """This rank's parameter parts by name ("model") and their places ("places")."""
    placed = placed_parameters(network)
    return {
        "model": {name: block.shard.detach() for name, block in placed.items()},
        "places": {name: place_record(block.place, block.full_shape) for name, block in placed.items()},
    }


def load_model_state(network: torch.nn.Module, state: dict[str, Any]) -> None:
    """Copy parameter parts saved by `model_state` on the same grid and rank into `network`."""
    own = {name: block.shard for name, block in placed_parameters(network).items()}
    saved = state["model"]
    if set(own) != set(saved):
        raise ValueError(f"checkpoint holds {sorted(saved)}, this model has {sorted(own)}")
    with torch.no_grad():
        for name, param in own.items():
            if param.shape != saved[name].shape:
                got, want = tuple(saved[name].shape), tuple(param.shape)
                raise ValueError(f"checkpoint {name} has shape {got}, expected {want}")
            param.copy_(saved[name])
