"""A checkpoint's parameters on any grid: each rank assembles the blocks it needs from the training parts.

A training rank's file holds, per layer, its flat part of the weight block W_l[in_cols, out_cols] of the
training grid, split over the layer's weight axis ("weight.L") and, with --learnable-features, its part
of layer 0's input block F_0[band b, feature band c] ("features"). A rank of another grid rebuilds each
full weight (D_l x D_l+1: small) and only the rows of the learned features its own input block covers,
from the rank files memory-mapped, so that it reads only the parts it uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gtool.geometry.bands import Band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import LayerGeometry, rank_layers
from gtool.trainer.checkpoints.files import CheckpointError, read_rank_file, recorded_shape
from gtool.trainer.models.gcn import ParallelGCN, block_of_weight
from gtool.trainer.nn.sharded import flat_part, from_parts

BlockBands = Callable[[LayerGeometry], tuple[Band, Band, int]]
"""The (row band, column band) of the block a training rank holds a part of, and the axis whose group
splits the block into parts."""


def _overlap(band: Band, wanted: range) -> range:
    """The real indices of `band` inside `wanted`."""
    return range(max(band.start, wanted.start), min(band.stop, wanted.stop))


class TrainedParameters:
    """The parameters of the checkpoint `manifest` describes (see gtool.trainer.checkpoints.files)."""

    def __init__(self, manifest: dict[str, Any]):
        shape = recorded_shape(manifest["shape"])
        self.folder = manifest["path"]
        gx, gy, gz = shape["grid"]
        self.grid = ProcessGrid(gx, gy, gz, shape["placement"])
        self.dims: list[int] = shape["dims"]
        orders, nodes = shape["transform_first"], shape["num_nodes"]
        self.geometry = [rank_layers(self.grid, rank, orders, nodes, False) for rank in range(self.grid.size)]
        self.states: dict[int, dict[str, torch.Tensor]] = {}

    def _parts(self, rank: int) -> dict[str, torch.Tensor]:
        """Rank `rank`'s parameter parts, memory-mapped (read when used)."""
        if rank not in self.states:
            self.states[rank] = read_rank_file(self.folder, rank, "cpu", mmap=True)["model"]
        return self.states[rank]

    def _region(self, name: str, layer: int, bands: BlockBands, rows: range, cols: range) -> torch.Tensor:
        """Rows `rows` x columns `cols` (real indices) of the matrix whose blocks the training ranks hold
        as flat parts named `name`, each block split over a group of `layer` (`bands`)."""
        owners: dict[tuple[Band, Band], list[tuple[int, int]]] = {}
        for rank, layers in enumerate(self.geometry):
            geometry = layers[layer]
            row_band, col_band, axis = bands(geometry)
            if _overlap(row_band, rows) and _overlap(col_band, cols):
                part = geometry.coords[axis]
                owners.setdefault((row_band, col_band), []).append((part, rank))
        out: torch.Tensor | None = None
        for (row_band, col_band), held in owners.items():
            parts = [self._parts(rank)[name] for _, rank in sorted(held)]
            block = from_parts(parts, (row_band.size, col_band.size))
            if out is None:
                out = block.new_zeros(len(rows), len(cols))
            r, c = _overlap(row_band, rows), _overlap(col_band, cols)
            out[r.start - rows.start : r.stop - rows.start, c.start - cols.start : c.stop - cols.start] = (
                block[
                    r.start - row_band.start : r.stop - row_band.start,
                    c.start - col_band.start : c.stop - col_band.start,
                ]
            )
        if out is None:
            raise CheckpointError(f"{self.folder}: no rank holds {name} rows {rows} x columns {cols}")
        return out

    def weight(self, layer: int) -> torch.Tensor:
        """Layer `layer`'s whole weight, D_l x D_l+1."""
        d_in, d_out = self.dims[layer], self.dims[layer + 1]

        def bands(g: LayerGeometry) -> tuple[Band, Band, int]:
            return g.in_cols(d_in), g.out_cols(d_out), g.weight_axis

        return self._region(f"weight.{layer}", layer, bands, range(d_in), range(d_out))

    def features(self, rows: Band, cols: Band) -> torch.Tensor:
        """The learned input features F_0[rows, cols] (bands of another grid), zero-padded."""

        def bands(g: LayerGeometry) -> tuple[Band, Band, int]:
            return g.inputs, g.in_cols(self.dims[0]), g.roles[0]

        real = self._region("features", 0, bands, range(rows.start, rows.stop), range(cols.start, cols.stop))
        block = real.new_zeros(rows.size, cols.size)
        block[: real.shape[0], : real.shape[1]] = real
        return block

    def load_into(self, model: ParallelGCN) -> None:
        """Give `model` (any grid, same widths) these parameters: each rank its parts of them."""
        if model.dims != self.dims:
            raise CheckpointError(
                f"{self.folder} holds a model of widths {self.dims}, the store needs {model.dims}"
            )
        state = {}
        for index, (geometry, weight) in enumerate(zip(model.layers, model.weights, strict=True)):
            block = block_of_weight(geometry, self.weight(index))
            state[f"weight.{index}"] = flat_part(block, weight.group.size, weight.group.index)
        if model.learned_features is not None:
            first, group = model.layers[0], model.learned_features.group
            block = self.features(first.inputs, first.in_cols(self.dims[0]))
            state["features"] = flat_part(block, group.size, group.index)
        model.load_state(state)
