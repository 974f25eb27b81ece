"""gtool's models as stacks of the public blocks: a GCN, or ScaleGNN's stack (input projection, GCN
layers each followed by RMSNorm, ReLU, dropout and a residual add, output head), each part a switch of
`ModelConfig` (docs/train.md, "Models")."""

from __future__ import annotations

from typing import Any, cast

import torch

from gtool.architecture import ModelConfig
from gtool.trainer.models.blocks import Bias, Dropout, GCNConv, Linear, NormReluDropout, Skip
from gtool.trainer.models.grid import Grid, Layout
from gtool.trainer.models.places import NORM_SCALE, initial_parameters


class Stack(torch.nn.Module):
    """The model of `config` on `grid`, from the input feature block (`grid.input`) to the logits
    (`output`); `learned_input`: its input is learned features, which reduce their own gradient."""

    def __init__(self, grid: Grid, config: ModelConfig, learned_input: bool = False):
        super().__init__()
        store, parts = grid.store, config.components
        features, classes = store.num_features, store.num_classes
        dims, orders = config.widths(features, classes), config.orders(features, classes)
        full = initial_parameters(config, grid.seed, features, classes, grid.dtype)
        rate = config.dropout_rate
        layout = grid.input
        self.input_dropout = Dropout(grid, layout, rate, key=0)
        reduce = not learned_input
        self.projection: Linear | None = None
        self.projection_bias: Bias | None = None
        if parts.input_projection:
            self.projection = Linear(grid, layout, config.hidden, full["projection.weight"], reduce)
            layout, reduce = self.projection.output, True
            if parts.bias:
                self.projection_bias = Bias(grid, layout, full["projection.bias"])
        self.convs = torch.nn.ModuleList()
        self.biases = torch.nn.ModuleList()
        self.acts = torch.nn.ModuleList()
        self.skips = torch.nn.ModuleDict()
        blocks = config.layers if parts.output_head else config.layers - 1
        for layer in range(config.layers):
            conv = GCNConv(grid, layout, dims[layer + 1], orders[layer], full[f"weight.{layer}"], reduce)
            self.convs.append(conv)
            reduce = True
            if parts.bias:
                self.biases.append(Bias(grid, conv.output, full[f"bias.{layer}"]))
            if layer < blocks:
                act = NormReluDropout(grid, conv.output, rate, parts.norm, key=layer + 1, scale=NORM_SCALE)
                self.acts.append(act)
                if parts.residual and dims[layer] == dims[layer + 1]:
                    self.skips[str(layer)] = Skip(grid, layout, conv.output)
                self.hidden = conv.output
            else:
                self.hidden = layout
            layout = conv.output
        self.head: Linear | None = None
        self.head_bias: Bias | None = None
        if parts.output_head:
            self.head = Linear(grid, layout, classes, full["head.weight"])
            layout = self.head.output
            if parts.bias:
                self.head_bias = Bias(grid, layout, full["head.bias"])
        self.output: Layout = layout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hidden_and_logits(x)[1]

    def hidden_and_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The output head's input (the last GCN layer's without a head; layout `hidden`) and the logits."""
        x = self.input_dropout(x)
        if self.projection is not None:
            x = self.projection(x)
            if self.projection_bias is not None:
                x = self.projection_bias(x)
        for layer, conv in enumerate(self.convs):
            skip = cast(Skip, self.skips[str(layer)]) if str(layer) in self.skips else None
            moving = None if skip is None else skip.start(x)  # its all-to-all runs beside the conv
            z = conv(x)
            if len(self.biases):
                z = self.biases[layer](z)
            if layer >= len(self.acts):
                return x, z
            residual = moving if moving is None or isinstance(moving, torch.Tensor) else moving.wait()
            x = self.acts[layer](z, residual)
        assert self.head is not None  # every GCN layer ends in a block only before a head
        logits = self.head(x)
        return x, logits if self.head_bias is None else self.head_bias(logits)


def _config(model: str, options: dict[str, Any]) -> ModelConfig:
    return ModelConfig(model=model, **options)


def gcn(grid: Grid, **options: Any) -> Stack:
    """A GCN on `grid`: `options` are ModelConfig's (layers, hidden, dropout, layer_order, ...)."""
    return Stack(grid, _config("gcn", options))


def scalegnn(grid: Grid, **options: Any) -> Stack:
    """ScaleGNN's stack on `grid`: `options` are ModelConfig's (layers, hidden, dropout, norm, ...)."""
    return Stack(grid, _config("scalegnn", options))
