"""A checkpoint's parameters on any grid: each rank assembles the blocks it needs from the training parts.

A training rank's file holds, per parameter (by its name in the network), its flat part of its block of
the parameter, split over the group the block's place names, and that place with the parameter's full
shape ("places"). A rank of another grid rebuilds from the rank files, memory-mapped, only the region of
each parameter its own block covers (for learned features, its rows), so that it reads only what it uses.
Checkpoints written before the places were recorded name parameters by layer; their places follow from
the manifest's model (`LEGACY_NAMES`).
"""

from __future__ import annotations

from typing import Any

import torch

from gtool.architecture import ModelConfig
from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid
from gtool.trainer.checkpoints.files import read_rank_file
from gtool.trainer.checkpoints.folder import CheckpointError, recorded_shape
from gtool.trainer.models.network import Network, placed_parameters
from gtool.trainer.models.places import feature_place, initial_parameters, stack_geometry
from gtool.trainer.models.state import load_model_state, recorded_place
from gtool.trainer.nn.sharded import Place, flat_part, from_parts

LEGACY_NAMES = {
    "projection.weight": "model.projection.weight",
    "projection.bias": "model.projection_bias.bias",
    "head.weight": "model.head.weight",
    "head.bias": "model.head_bias.bias",
    "features": "features.features",
}
"""Parameter names of checkpoints written before the model was a module, and theirs now."""

LAYER_PARTS = {"weight": "convs", "bias": "biases", "scale": "acts"}
"""Each layer's parameters in such a checkpoint (weight.L, bias.L, scale.L), and their module lists now."""
Located = tuple[Place, tuple[int, ...]]


def legacy_name(name: str) -> str:
    """A parameter's name now, from its name in a checkpoint written before the model was a module."""
    if name in LEGACY_NAMES:
        return LEGACY_NAMES[name]
    kind, layer = name.split(".")
    return f"model.{LAYER_PARTS[kind]}.{layer}.{kind}"


def _overlap(band: Band, wanted: range) -> range:
    """The real indices of `band` inside `wanted`."""
    return range(max(band.start, wanted.start), min(band.stop, wanted.stop))


def _cut(band: Band, wanted: range, real: range) -> tuple[slice, slice]:
    """Where the `real` indices lie in a block of `band` and in an array of the `wanted` indices."""
    return slice(real.start - band.start, real.stop - band.start), slice(
        real.start - wanted.start, real.stop - wanted.start
    )


class TrainedParameters:
    """The parameters of the checkpoint `manifest` describes (see gtool.trainer.checkpoints.files)."""

    def __init__(self, manifest: dict[str, Any]):
        shape = recorded_shape(manifest["shape"])
        self.manifest = manifest
        self.folder = manifest["path"]
        gx, gy, gz = shape["grid"]
        self.grid = ProcessGrid(gx, gy, gz, shape["placement"])
        self.files: dict[int, dict[str, Any]] = {}
        self.places: list[dict[str, Located]] | None = None

    def _file(self, rank: int) -> dict[str, Any]:
        """Rank `rank`'s file, memory-mapped (its tensors read when used), with names as they are now."""
        if rank not in self.files:
            content = read_rank_file(self.folder, rank, "cpu", mmap=True)
            if "places" not in content:
                content = {"model": {legacy_name(k): v for k, v in content["model"].items()}}
            self.files[rank] = content
        return self.files[rank]

    def _located(self, num_features: int, num_classes: int) -> list[dict[str, Located]]:
        """Every training rank's places of the parameters, by name."""
        if self.places is None:
            if "places" in self._file(0):
                self.places = [
                    {name: recorded_place(record) for name, record in self._file(rank)["places"].items()}
                    for rank in range(self.grid.size)
                ]
            else:
                self.places = self._legacy_places(num_features, num_classes)
        return self.places

    def _legacy_places(self, num_features: int, num_classes: int) -> list[dict[str, Located]]:
        """The places of a checkpoint that did not record them, from its model's geometry."""
        shape = recorded_shape(self.manifest["shape"])
        dims = shape["dims"]
        options = self.manifest.get("model") or (
            {"layers": len(dims) - 1} | ({"hidden": dims[1]} if len(dims) > 2 else {})
        )
        model = ModelConfig(**options)
        full = initial_parameters(model, 0, num_features, num_classes, torch.float64)
        shapes = {legacy_name(name): tuple(value.shape) for name, value in full.items()}
        num_nodes, orders = shape["num_nodes"], tuple(shape["transform_first"])
        located = []
        for rank in range(self.grid.size):
            geometry = stack_geometry(
                model, self.grid, rank, num_nodes, num_features, num_classes, False, orders
            )
            held = {legacy_name(n): (p, shapes[legacy_name(n)]) for n, p in geometry.places().items()}
            if "features.features" in self._file(0)["model"]:
                place = feature_place(self.grid, rank, num_nodes, num_features)
                held["features.features"] = (place, (num_nodes, num_features))
            located.append(held)
        return located

    def _region(self, name: str, places: list[Place], rows: range | None, cols: range) -> torch.Tensor:
        """Rows `rows` x columns `cols` (real indices; rows None: a vector) of the parameter `name`, whose
        training ranks hold the blocks `places` (one per rank), each split into flat parts over a group."""
        owners: dict[tuple[Band | None, Band], dict[int, int]] = {}
        for rank, place in enumerate(places):
            if (place.rows is None or rows is None or _overlap(place.rows, rows)) and _overlap(
                place.cols, cols
            ):
                part = self.grid.coords(rank)[place.axis]
                owners.setdefault((place.rows, place.cols), {}).setdefault(part, rank)
        out = torch.zeros(len(cols) if rows is None else (len(rows), len(cols)))
        for (row_band, col_band), held in owners.items():
            block = from_parts(
                [self._file(held[part])["model"][name] for part in sorted(held)],
                Place(row_band, col_band, 0).shape,
            )
            out = out.to(block.dtype)
            c_from, c_to = _cut(col_band, cols, _overlap(col_band, cols))
            if row_band is None or rows is None:
                out[c_to] = block[c_from]
            else:
                r_from, r_to = _cut(row_band, rows, _overlap(row_band, rows))
                out[r_to, c_to] = block[r_from, c_from]
        return out

    def block(self, name: str, place: Place, num_features: int, num_classes: int) -> torch.Tensor:
        """The zero-padded block of parameter `name` at `place` (bands of any grid), for a store of
        `num_features` features and `num_classes` classes."""
        located = self._located(num_features, num_classes)
        if name not in located[0]:
            raise CheckpointError(f"{self.folder} holds no parameter {name}")
        rows = None if place.rows is None else range(place.rows.start, place.rows.stop)
        cols = range(place.cols.start, place.cols.stop)
        real = self._region(name, [held[name][0] for held in located], rows, cols)
        padded = real.new_zeros(place.shape)
        if rows is None:
            padded[: real.shape[0]] = real
        else:
            padded[: real.shape[0], : real.shape[1]] = real
        return padded

    def load_into(self, network: Network) -> None:
        """Give `network` (any grid, the same model) these parameters: each rank its parts of them."""
        placed = placed_parameters(network)
        shapes = {name: block.full_shape for name, block in placed.items()}
        features, classes = network.features.output.width, network.output.width
        located = self._located(features, classes)
        saved = {name: full_shape for name, (_, full_shape) in located[0].items()}
        if set(saved) != set(shapes):
            raise CheckpointError(
                f"{self.folder} holds the parameters of another model "
                f"({', '.join(sorted(set(saved) ^ set(shapes)))} differ)"
            )
        state = {}
        for name, block in placed.items():
            if saved[name] != block.full_shape:
                raise CheckpointError(
                    f"{self.folder} holds {name} of shape {list(saved[name])}, the model on this store needs "
                    f"{list(block.full_shape)} (trained on a store of other features or classes?)"
                )
            padded = self.block(name, block.place, features, classes)
            state[name] = flat_part(padded.to(block.shard.dtype), block.group.size, block.group.index)
        load_model_state(network, {"model": state})
