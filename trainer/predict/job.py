"""A `gtool predict` job, checked before any rank starts (the checkpoint's model, the store, the output), and
its ranks started. Nothing here imports torch: a local launch's supervisor does, once, for its ranks."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtool.architecture import ModelConfig
from gtool.errors import GtoolError
from gtool.store.reader import open_store
from gtool.store.writing.output_lock import output_lock
from gtool.store.writing.staging import PREDICT_OUTPUT, absolute_location, check_output, refuse_inside_store
from gtool.trainer.checkpoints.folder import (
    BEST,
    CheckpointError,
    latest_manifest,
    refuse_other_shape,
    refuse_other_store,
)
from gtool.trainer.config import RuntimeConfig, TrainConfig
from gtool.trainer.launch.entry import Entry
from gtool.trainer.launch.environment import environment_rank
from gtool.trainer.launch.start import start_ranks


@dataclass(frozen=True)
class PredictJob:
    """Predict with the checkpoint `manifest` describes, on `config`'s store and grid, into `output`."""

    config: TrainConfig
    manifest: dict[str, Any]
    output: str
    embeddings: bool = False
    overwrite: bool = False


USES = ("best", "latest")
"""Which model of a checkpoint folder `gtool predict --use` takes."""


def model_manifest(checkpoint: str, use: str = "best") -> dict:
    """The manifest of the best-validation model's copy in `checkpoint` (`use` "best"; the latest checkpoint
    when the folder has no such copy: no validation nodes, or written by an older gtool) or of its latest
    checkpoint ("latest"); it must record the model's options. Its "use" says which was taken."""
    if use not in USES:
        raise GtoolError(f"--use must be one of {', '.join(USES)}, got {use!r}")
    directory, required = Path(checkpoint), ("dims", "num_nodes")
    manifest = latest_manifest(directory, required, BEST) if use == "best" else None
    manifest = {**manifest, "use": "best"} if manifest else latest_manifest(directory, required)
    if manifest is None:
        raise CheckpointError(f"{checkpoint}: no checkpoint (latest.json) there; train with --checkpoint DIR")
    if not manifest.get("model"):
        raise CheckpointError(
            f"{manifest['path']}: the manifest does not record the model's options (written by an older "
            "gtool train); train again to predict from it"
        )
    return {"use": "latest", **manifest}


def checkpoint_model(checkpoint: str) -> ModelConfig:
    """The model a checkpoint folder's latest checkpoint was trained with."""
    return ModelConfig(**model_manifest(checkpoint, "latest")["model"])


def prediction_job(
    store: str,
    checkpoint: str,
    output: str,
    grid: tuple[int, int, int],
    runtime: RuntimeConfig,
    embeddings: bool = False,
    overwrite: bool = False,
    use: str = "best",
) -> PredictJob:
    """The job, with every problem found before a rank starts: no checkpoint, one of another store's
    shape (nodes, features, classes or tasks), a model without a hidden layer for `embeddings`, an
    existing output without `overwrite`, an output inside the store. The paths are resolved once, here
    (absolute; URLs kept); `use` says which model (model_manifest)."""
    store, checkpoint, output = (absolute_location(path) for path in (store, checkpoint, output))
    refuse_inside_store("-o", output, store)
    manifest = model_manifest(checkpoint, use)
    model = ModelConfig(**manifest["model"])
    opened = open_store(store)
    shape = manifest["shape"]
    features, classes = opened.num_features, opened.num_classes
    widths = model.widths(features, classes) if model.builtin else [features, classes]
    if shape["num_nodes"] != opened.num_nodes or shape["dims"] != widths:
        raise CheckpointError(
            f"{manifest['path']} was trained on {shape['num_nodes']} nodes with widths {shape['dims']}; "
            f"{store} has {opened.num_nodes} nodes and needs widths {widths}"
        )
    refuse_other_store(manifest, store, opened)
    if model.learnable_features:  # saved by position: the store must hold each node's rows where training had
        refuse_other_shape(manifest, {"node_order": opened.node_order})
    if embeddings and model.builtin and model.layers < 2 and not model.components.output_head:
        raise GtoolError(
            "--embeddings needs a hidden layer: a model of 2 or more GCN layers, or one with an output head"
        )
    check_output(output, overwrite, PREDICT_OUTPUT)
    config = TrainConfig(store, grid, model=model, runtime=runtime)
    return PredictJob(config, manifest, output, embeddings, overwrite)


def predict(job: PredictJob) -> None:
    """Run `job` on the ranks of torchrun/srun when started by one, else on local processes (as `gtool
    train`). The process that starts the local ranks, or rank 0 of torchrun/srun's, locks the output for
    the whole run: a second run writing it is refused before any rank loads or computes. Raises RankFailed
    naming the rank that failed first."""
    env = environment_rank()
    with output_lock(job.output, "gtool predict") if env is None or env.rank == 0 else nullcontext():
        start_ranks(job.config, "predict", Entry("gtool.trainer.predict.forward", "predict_rank"), job)
