"""A `gtool predict` job, checked before any rank starts: the checkpoint's model, the store, the output."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtool.architecture import ModelConfig
from gtool.errors import GtoolError
from gtool.store.reader import open_store
from gtool.store.writing.staging import (
    PREDICT_OUTPUT,
    check_output,
)
from gtool.trainer.checkpoints.files import CheckpointError, latest_manifest, refuse_other_shape
from gtool.trainer.config import RuntimeConfig, TrainConfig


@dataclass(frozen=True)
class PredictJob:
    """Predict with the checkpoint `manifest` describes, on `config`'s store and grid, into `output`."""

    config: TrainConfig
    manifest: dict[str, Any]
    output: str
    embeddings: bool = False
    overwrite: bool = False


def model_manifest(checkpoint: str) -> dict:
    """The manifest of the latest checkpoint in `checkpoint`, which must record the model's options."""
    manifest = latest_manifest(Path(checkpoint))
    if manifest is None:
        raise CheckpointError(f"{checkpoint}: no checkpoint (latest.json) there; train with --checkpoint DIR")
    if not manifest.get("model"):
        raise CheckpointError(
            f"{manifest['path']}: the manifest does not record the model's options (written by an older "
            "gtool train); train again to predict from it"
        )
    return manifest


def checkpoint_model(checkpoint: str) -> ModelConfig:
    """The model a checkpoint folder's latest checkpoint was trained with."""
    return ModelConfig(**model_manifest(checkpoint)["model"])


def prediction_job(
    store: str,
    checkpoint: str,
    output: str,
    grid: tuple[int, int, int],
    runtime: RuntimeConfig,
    embeddings: bool = False,
    overwrite: bool = False,
) -> PredictJob:
    """The job, with every problem found before a rank starts: no checkpoint, one of another store's
    shape, a model without a hidden layer for `embeddings`, an existing output without `overwrite`."""
    manifest = model_manifest(checkpoint)
    model = ModelConfig(**manifest["model"])
    opened = open_store(store)
    shape = manifest["shape"]
    widths = model.widths(opened.num_features, opened.num_classes)
    if shape["num_nodes"] != opened.num_nodes or shape["dims"] != widths:
        raise CheckpointError(
            f"{manifest['path']} was trained on {shape['num_nodes']} nodes with widths {shape['dims']}; "
            f"{store} has {opened.num_nodes} nodes and needs widths {widths}"
        )
    if model.learnable_features:  # saved by position: the store must hold each node's rows where training had
        refuse_other_shape(manifest, {"node_order": opened.node_order})
    if embeddings and model.layers < 2 and not model.components.output_head:
        raise GtoolError(
            "--embeddings needs a hidden layer: a model of 2 or more GCN layers, or one with an output head"
        )
    check_output(output, overwrite, PREDICT_OUTPUT)
    config = TrainConfig(store, grid, model=model, runtime=runtime)
    return PredictJob(config, manifest, output, embeddings, overwrite)
