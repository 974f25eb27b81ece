"""What a run trains: its input features and a model over them (gtool's Stack, or a user's stack of the
blocks), with what the loop needs to know of it: its parameters' places, their decay, its masks."""

from __future__ import annotations

from typing import Protocol, cast

import torch

from gtool.architecture import ModelConfig
from gtool.errors import GtoolError
from gtool.trainer.models.blocks import Dropout, NormReluDropout
from gtool.trainer.models.features import Features
from gtool.trainer.models.grid import Grid, Layout
from gtool.trainer.models.stack import Stack
from gtool.trainer.models.user import user_model
from gtool.trainer.nn.sharded import ShardedBlock

FEATURES = "features.features"
"""The learned features' parameter, by its name in a Network."""


class HiddenModel(Protocol):
    """A model that gives its last hidden block beside the logits (gtool's Stack does)."""

    def hidden_and_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...


class Network(torch.nn.Module):
    """`model` (from `grid.input` to logits in its `output` layout) over the `features` block."""

    def __init__(self, features: Features, model: torch.nn.Module):
        super().__init__()
        self.features = features
        self.model = model
        self.output: Layout = getattr(model, "output")  # noqa: B009 (a user's module: checked by user_model)
        self.hidden: Layout | None = getattr(model, "hidden", None)
        """The layout of what `hidden_and_logits` gives beside the logits (None: the model gives none)."""

    def forward(self) -> torch.Tensor:
        return self.model(self.features())

    def hidden_and_logits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The model's last hidden block (`gtool predict --embeddings`) and its logits."""
        return cast(HiddenModel, self.model).hidden_and_logits(self.features())


def placed_parameters(module: torch.nn.Module) -> dict[str, ShardedBlock]:
    """Every parameter of `module` by name, as the sharded block whose part it is."""
    blocks = {
        id(value.shard): value
        for sub in module.modules()
        for value in vars(sub).values()
        if isinstance(value, ShardedBlock)
    }
    return {name: blocks[id(param)] for name, param in module.named_parameters() if id(param) in blocks}


def mask_elements(module: torch.nn.Module) -> int:
    """Elements of the dropout masks (and fused ReLUs) one full-graph training epoch computes here."""
    return sum(sub.mask_elements() for sub in module.modules() if isinstance(sub, Dropout))


def has_norm(module: torch.nn.Module) -> bool:
    """Whether `module` has a fused RMSNorm block."""
    return any(isinstance(sub, NormReluDropout) and sub.sharded is not None for sub in module.modules())


def decay_groups(network: Network) -> tuple[list, list, list]:
    """The parameters as the optimizer decays them: the model's first matrix; the later matrices and the
    learned features; biases and norm scales (never decayed)."""
    placed = placed_parameters(network)
    matrices = [b.shard for name, b in placed.items() if b.place.rows is not None and name != FEATURES]
    learned = [b.shard for name, b in placed.items() if name == FEATURES]
    vectors = [b.shard for b in placed.values() if b.place.rows is None]
    return matrices[:1], matrices[1:] + learned, vectors


def _checked(network: Network, grid: Grid, where: str) -> Network:
    """Refuse a model whose parameters are not the blocks' or whose logits do not fit the store."""
    placed = placed_parameters(network)
    for name, _ in network.named_parameters():
        if name not in placed:
            raise GtoolError(
                f"{where}: parameter {name} is not one of gtool's blocks' (every rank would train its own "
                "copy): build the model from gtool.trainer's blocks"
            )
    classes, width = grid.store.num_classes, network.output.width
    if width != classes:
        raise GtoolError(
            f"{where}: the model's output has {width} columns, the store {grid.store.location} has {classes} "
            "classes"
        )
    return network


def build_network(grid: Grid, config: ModelConfig) -> Network:
    """The network of `config` on `grid`: gtool's model, or the one `--model FILE.py:NAME` builds."""
    features = Features(grid, config.normalize_features, config.learnable_features)
    if config.builtin:
        return _checked(Network(features, Stack(grid, config, features.learnable)), grid, config.model)
    if features.learnable:
        raise GtoolError(f"--learnable-features trains gtool's models only, not {config.model}")
    return _checked(Network(features, user_model(config.model, grid)), grid, config.model)
