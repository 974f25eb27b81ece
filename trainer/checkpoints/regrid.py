"""A checkpoint's parameters on any grid: each rank assembles the blocks it needs from the training parts.

A training rank's file holds, per parameter (by name: `models.places`), its flat part of its block of the
parameter, split over the group the place names, and with --learnable-features its part of the feature
block F[band y, feature band z] ("features"). A rank of another grid rebuilds each whole parameter (widths
only: small) and only the rows of the learned features its own block covers, from the rank files
memory-mapped, so that it reads only the parts it uses.
"""

from __future__ import annotations

from typing import Any

import torch

from gtool.architecture import ModelConfig
from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid
from gtool.trainer.checkpoints.files import read_rank_file
from gtool.trainer.checkpoints.folder import CheckpointError, recorded_shape
from gtool.trainer.models.gcn import ParallelGCN
from gtool.trainer.models.places import Place, block_of, feature_place, initial_parameters, stack_geometry
from gtool.trainer.nn.sharded import flat_part, from_parts


def _overlap(band: Band, wanted: range) -> range:
    """The real indices of `band` inside `wanted`."""
    return range(max(band.start, wanted.start), min(band.stop, wanted.stop))


def _cut(block: torch.Tensor, band: Band, wanted: range, real: range) -> tuple[slice, slice]:
    """Where the `real` indices lie in `block` (of `band`) and in an array of the `wanted` indices."""
    return slice(real.start - band.start, real.stop - band.start), slice(
        real.start - wanted.start, real.stop - wanted.start
    )


class TrainedParameters:
    """The parameters of the checkpoint `manifest` describes (see gtool.trainer.checkpoints.files), for a
    store of `num_features` features and `num_classes` classes (None: the recorded widths tell, as they
    do for a GCN without input projection or output head)."""

    def __init__(
        self, manifest: dict[str, Any], num_features: int | None = None, num_classes: int | None = None
    ):
        shape = recorded_shape(manifest["shape"])
        self.folder = manifest["path"]
        gx, gy, gz = shape["grid"]
        self.grid = ProcessGrid(gx, gy, gz, shape["placement"])
        self.dims: list[int] = shape["dims"]
        self.model = ModelConfig(**manifest.get("model", self._recorded_gcn()))
        self.num_features = self.dims[0] if num_features is None else num_features
        self.num_classes = self.dims[-1] if num_classes is None else num_classes
        self.num_nodes = shape["num_nodes"]
        orders = tuple(shape["transform_first"])
        self.places = [
            stack_geometry(
                self.model,
                self.grid,
                rank,
                self.num_nodes,
                self.num_features,
                self.num_classes,
                False,
                orders,
            ).places()
            for rank in range(self.grid.size)
        ]
        self.states: dict[int, dict[str, torch.Tensor]] = {}

    def _recorded_gcn(self) -> dict[str, int]:
        """The options of a GCN of the recorded widths (a manifest without its model's options)."""
        return {"layers": len(self.dims) - 1} | ({"hidden": self.dims[1]} if len(self.dims) > 2 else {})

    def _parts(self, rank: int) -> dict[str, torch.Tensor]:
        """Rank `rank`'s parameter parts, memory-mapped (read when used)."""
        if rank not in self.states:
            self.states[rank] = read_rank_file(self.folder, rank, "cpu", mmap=True)["model"]
        return self.states[rank]

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
        out: torch.Tensor | None = None
        for (row_band, col_band), held in owners.items():
            block = from_parts(
                [self._parts(held[part])[name] for part in sorted(held)], Place(row_band, col_band, 0).shape
            )
            if out is None:
                out = block.new_zeros(len(cols) if rows is None else (len(rows), len(cols)))
            c_from, c_to = _cut(block, col_band, cols, _overlap(col_band, cols))
            if row_band is None or rows is None:
                out[c_to] = block[c_from]
            else:
                r_from, r_to = _cut(block, row_band, rows, _overlap(row_band, rows))
                out[r_to, c_to] = block[r_from, c_from]
        if out is None:
            raise CheckpointError(f"{self.folder}: no rank holds {name} rows {rows} x columns {cols}")
        return out

    def full(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """The whole parameter `name` of `shape`."""
        places = [held[name] for held in self.places]
        rows = None if len(shape) == 1 else range(shape[0])
        return self._region(name, places, rows, range(shape[-1]))

    def weight(self, layer: int) -> torch.Tensor:
        """GCN layer `layer`'s whole weight, D_l x D_l+1."""
        return self.full(f"weight.{layer}", (self.dims[layer], self.dims[layer + 1]))

    def features(self, rows: Band, cols: Band) -> torch.Tensor:
        """The learned input features F[rows, cols] (bands of another grid), zero-padded."""
        places = [
            feature_place(self.grid, rank, self.num_nodes, self.num_features)
            for rank in range(self.grid.size)
        ]
        real = self._region("features", places, range(rows.start, rows.stop), range(cols.start, cols.stop))
        block = real.new_zeros(rows.size, cols.size)
        block[: real.shape[0], : real.shape[1]] = real
        return block

    def load_into(self, model: ParallelGCN) -> None:
        """Give `model` (any grid, same model) these parameters: each rank its parts of them."""
        if model.dims != self.dims:
            raise CheckpointError(
                f"{self.folder} holds a model of widths {self.dims}, the store needs {model.dims}"
            )
        shapes = {
            name: tuple(value.shape)
            for name, value in initial_parameters(
                model.config.model, 0, self.num_features, self.num_classes, torch.float64
            ).items()
        }
        state = {}
        for name, place in model.places.items():
            block = block_of(self.full(name, shapes[name]), place)
            group = model.blocks[name].group
            state[name] = flat_part(block, group.size, group.index)
        if model.learned_features is not None:
            group, place = model.learned_features.group, model.feature_place
            assert place.rows is not None
            state["features"] = flat_part(self.features(place.rows, place.cols), group.size, group.index)
        model.load_state(state)
