"""gtool's models' initial parameters, and where each parameter of theirs lived on a grid by its name in
checkpoints written before the places were recorded (checkpoints.regrid reads those)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gtool.architecture import ModelConfig
from gtool.geometry.bands import band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import (
    XYZ,
    LayerGeometry,
    LinearGeometry,
    linear_geometry,
    rank_layers,
    roles_after,
)
from gtool.trainer.nn.randomness import DENSE_WEIGHTS, initial_weight
from gtool.trainer.nn.sharded import Place

NORM_SCALE = 0.1
"""The initial RMSNorm scale (docs/train.md, "Models": 8 layers on Cora, 0.778 with 1, 0.793 with 0.1)."""


@dataclass(frozen=True)
class StackGeometry:
    """Every operation of a model as one rank holds it: the optional input projection, the GCN layers,
    the optional output head; and which GCN layers end in a block (norm, ReLU, dropout, residual)."""

    config: ModelConfig
    projection: LinearGeometry | None
    layers: tuple[LayerGeometry, ...]
    head: LinearGeometry | None
    dims: list[int]
    num_features: int
    num_classes: int

    @property
    def blocks(self) -> range:
        """The GCN layers followed by a block: all but the last, and the last too before an output head."""
        return range(len(self.layers) if self.head is not None else len(self.layers) - 1)

    def places(self) -> dict[str, Place]:
        """Every parameter's place, in the optimizer's order: weights (forward order), then vectors."""
        parts, dims = self.config.components, self.dims
        hidden, features, classes = self.config.hidden, self.num_features, self.num_classes
        places: dict[str, Place] = {}
        if self.projection is not None:
            p = self.projection
            places["projection.weight"] = Place(p.in_cols(features), p.out_cols(hidden), p.weight_axis)
        for g in self.layers:
            d_in, d_out = dims[g.layer], dims[g.layer + 1]
            places[f"weight.{g.layer}"] = Place(g.in_cols(d_in), g.out_cols(d_out), g.weight_axis)
        if self.head is not None:
            h = self.head
            places["head.weight"] = Place(h.in_cols(hidden), h.out_cols(classes), h.weight_axis)
        if parts.bias and self.projection is not None:
            places["projection.bias"] = Place(
                None, self.projection.out_cols(hidden), self.projection.roles[1]
            )
        for g in self.layers:
            if parts.bias:
                places[f"bias.{g.layer}"] = Place(None, g.out_cols(dims[g.layer + 1]), g.row_axis)
            if parts.norm and g.layer in self.blocks:
                places[f"scale.{g.layer}"] = Place(None, g.out_cols(dims[g.layer + 1]), g.row_axis)
        if parts.bias and self.head is not None:
            places["head.bias"] = Place(None, self.head.out_cols(classes), self.head.roles[1])
        return places


def stack_geometry(
    config: ModelConfig,
    grid: ProcessGrid,
    rank: int,
    num_nodes: int,
    num_features: int,
    num_classes: int,
    two_matrices: bool,
    orders: tuple[bool, ...] | None = None,
) -> StackGeometry:
    """The model of `config` as rank `rank` of `grid` holds it (its GCN layers in `orders`, those of
    --layer-order if None)."""
    parts = config.components
    orders = config.orders(num_features, num_classes) if orders is None else orders
    layers = rank_layers(grid, rank, orders, num_nodes, two_matrices, config.start)
    projection = linear_geometry(grid, rank, XYZ, num_nodes) if parts.input_projection else None
    last = layers[-1]
    after = roles_after(last.roles, last.transform_first)
    head = linear_geometry(grid, rank, after, num_nodes) if parts.output_head else None
    dims = config.widths(num_features, num_classes)
    return StackGeometry(config, projection, layers, head, dims, num_features, num_classes)


def feature_place(grid: ProcessGrid, rank: int, num_nodes: int, num_features: int) -> Place:
    """The learned features' block: F[band y, feature band z], split over the x-group."""
    coords, dims = grid.coords(rank), grid.dims
    return Place(band(coords[1], dims[1], num_nodes), band(coords[2], dims[2], num_features), 0)


def initial_parameters(
    config: ModelConfig, seed: int, num_features: int, num_classes: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Every parameter's full initial value (all small: widths only): GCN layers' weights Glorot-uniform
    (stream 1, as ever), the input projection's too (its own stream), the output head's zero (as ViT's
    head: the residual stream's sum of blocks would otherwise start the logits far from uniform), biases
    0, norm scales NORM_SCALE (LayerScale: each block starts as a small change of the residual stream)."""
    parts, hidden = config.components, config.hidden
    dims = config.widths(num_features, num_classes)
    full: dict[str, torch.Tensor] = {}
    if parts.input_projection:
        full["projection.weight"] = initial_weight(seed, 0, num_features, hidden, dtype, DENSE_WEIGHTS)
    for layer in range(config.layers):
        full[f"weight.{layer}"] = initial_weight(seed, layer, dims[layer], dims[layer + 1], dtype)
    if parts.output_head:
        full["head.weight"] = torch.zeros(hidden, num_classes, dtype=dtype)
    if parts.bias and parts.input_projection:
        full["projection.bias"] = torch.zeros(hidden, dtype=dtype)
    blocks = config.layers if parts.output_head else config.layers - 1
    for layer in range(config.layers):
        if parts.bias:
            full[f"bias.{layer}"] = torch.zeros(dims[layer + 1], dtype=dtype)
        if parts.norm and layer < blocks:
            full[f"scale.{layer}"] = torch.full((dims[layer + 1],), NORM_SCALE, dtype=dtype)
    if parts.bias and parts.output_head:
        full["head.bias"] = torch.zeros(num_classes, dtype=dtype)
    return full
