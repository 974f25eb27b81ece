"""`gtool predict`: a trained model's full-graph 3D forward on any grid, written in the original node order.

The model is rebuilt from the latest checkpoint of a `gtool train --checkpoint DIR` run (its manifest keeps
the model's options; gtool.trainer.reshard gives each rank of the new grid its parts of the parameters).
Each rank computes its logits block (and, with embeddings, the last layer's input block) exactly as the
trainer evaluates, and the blocks go out through gtool.trainer.node_output. The output is a Zarr group
written into a staging folder and moved into place by rank 0 once every array is complete:

    OUT/logits        N x classes, row i: original node i
    OUT/embeddings    N x hidden (with --embeddings): the input of the last layer (after its ReLU)
    OUT/zarr.json     attributes "gtool_predictions": store, checkpoint, epoch, grid, accuracy, complete
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import zarr

from gtool.errors import GtoolError
from gtool.geometry.bands import Band
from gtool.geometry.layers import order_of_layer_output, rank_layers
from gtool.model import ModelConfig
from gtool.store import layout
from gtool.store.reader import open_store
from gtool.store.writing.chunk_writer import ChunkSink
from gtool.store.writing.output_lock import output_lock
from gtool.store.writing.staging import (
    PREDICT_OUTPUT,
    StagedOutput,
    check_output,
    staging_path,
    storage_error,
)
from gtool.trainer.checkpoint import CheckpointError, latest_manifest, refuse_other_shape
from gtool.trainer.config import RuntimeConfig, TrainConfig
from gtool.trainer.distributed import GridComm
from gtool.trainer.launch import RankEnv, environment_rank
from gtool.trainer.loop import load_model_rank, logit_targets
from gtool.trainer.loss import accuracies
from gtool.trainer.model import ParallelGCN
from gtool.trainer.node_output import HeldBlock, write_node_rows
from gtool.trainer.report import Reporter
from gtool.trainer.reshard import TrainedParameters
from gtool.trainer.run import join_grid, start_ranks


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
        refuse_other_shape(manifest, {"node_order": opened.meta.node_order})
    if embeddings and model.layers < 2:
        raise GtoolError("--embeddings needs a model of 2 or more layers (a 1-layer GCN has no hidden layer)")
    check_output(output, overwrite, PREDICT_OUTPUT)
    config = TrainConfig(store, grid, model=model, runtime=runtime)
    return PredictJob(config, manifest, output, embeddings, overwrite)


def _held(
    model: ParallelGCN, comm: GridComm, which: str, values: torch.Tensor
) -> tuple[HeldBlock, list[Band], int]:
    """This rank's block of `which` (logits: the last layer's output; embeddings: its input), the column
    band of every rank's block of it (bands do not depend on the layer's matrix) and the array's width."""
    last = len(model.layers) - 1
    geometry = model.layers[last]
    orders = [g.transform_first for g in model.layers]
    everyone = [
        rank_layers(comm.grid, r, orders, model.num_nodes, False)[last] for r in range(comm.grid.size)
    ]
    if which == "logits":
        width, order = model.dims[last + 1], order_of_layer_output(last)
        rows, writes = geometry.rows, comm.coords[geometry.replica_axis] == 0
        columns = [g.out_cols(width) for g in everyone]
    else:
        width, order = model.dims[last], order_of_layer_output(last - 1)
        rows, writes = geometry.inputs, comm.coords[geometry.roles[0]] == 0
        columns = [g.in_cols(width) for g in everyone]
    return HeldBlock(values, rows, order, columns[comm.rank], writes), columns, width


def _outputs(model: ParallelGCN, embeddings: bool) -> dict[str, torch.Tensor]:
    """This rank's logits block and, with `embeddings`, its block of the last layer's input: the forward
    pass training evaluates with (no dropout)."""
    last = len(model.layers) - 1
    with torch.no_grad():
        if not embeddings:
            return {"logits": model.forward(0, training=False)}
        hidden = model.propagate(range(last), 0, training=False)
        return {"embeddings": hidden, "logits": model.propagate(range(last, last + 1), 0, False, hidden)}


def _write(
    comm: GridComm, job: PredictJob, outputs: dict[str, torch.Tensor], model: ParallelGCN
) -> dict[str, int]:
    """Every output array written into the staging location; the rows of each (every rank calls it)."""
    store, sink = open_store(job.config.store), ChunkSink(staging_path(job.output))
    rows = {}
    for name, values in outputs.items():
        held, columns, width = _held(model, comm, name, values)
        try:
            written = write_node_rows(sink, name, store, held, columns, width, comm.everyone)
        except OSError as exc:  # a full device or a read-only one: one line naming where
            raise storage_error(exc, job.output) or exc from None
        total = torch.tensor([written], dtype=torch.int64, device=comm.everyone.device)
        rows[name] = int(comm.everyone.all_reduce(total).item())
    return rows


def predict_on(comm: GridComm, job: PredictJob, device: torch.device, reporter: Reporter) -> dict[str, Any]:
    """What one rank of the prediction grid does once joined; returns the figures of the summary.

    Rank 0 prepares the staging location, and publishes it once every rank has written (or removes it when
    it fails); the output is locked before the ranks start (`predict`)."""
    config = job.config
    started = time.perf_counter()
    data = load_model_rank(config, comm.grid, comm.rank, device)
    model = ParallelGCN(data, comm, config, device)
    TrainedParameters(job.manifest).load_into(model)
    outputs = _outputs(model, job.embeddings)
    try:
        accuracy, unscored = accuracies(outputs["logits"], logit_targets(data, model, comm, device)), None
    except GtoolError as error:  # no labels, or none to train on: the logits are written all the same
        accuracy, unscored = None, str(error)
    del data
    computed = time.perf_counter() - started
    staged = StagedOutput(job.output, job.overwrite, PREDICT_OUTPUT) if comm.rank == 0 else None
    try:
        if staged is not None:
            zarr.open_group(store=staged.path, mode="w")
        comm.everyone.barrier()
        summary = {
            "store": config.store,
            "checkpoint": job.manifest["path"],
            "epoch": job.manifest["epoch"],
            "grid": "x".join(map(str, comm.grid.dims)),
            "rows": _write(comm, job, outputs, model),
            "accuracy": accuracy,
            "unscored": unscored,
            "seconds": {"forward": computed, "total": time.perf_counter() - started},
        }
        if staged is not None:
            zarr.open_group(store=staged.path, mode="r+").attrs[layout.PREDICTIONS_KEY] = {
                **summary,
                "complete": True,
            }
            staged.publish()
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    reporter.message(_summary_text(job.output, summary, model.dims))
    return summary


def _summary_text(output: str, summary: dict[str, Any], dims: list[int]) -> str:
    """The closing lines: what was written from what, and the accuracy of the logits' argmax per split."""
    widths = {"logits": dims[-1], "embeddings": dims[-2]}
    shapes = ", ".join(f"{name} {rows} x {widths[name]}" for name, rows in summary["rows"].items())
    accuracy = summary["accuracy"]
    if accuracy is None:
        scores = f"n/a ({summary['unscored']})"
    else:
        scores = "  ".join(f"{split} {value:.4f}" for split, value in accuracy.items())
    return (
        f"gtool predict: wrote {output} ({shapes}; rows in the original node order) from "
        f"{summary['checkpoint']} (epoch {summary['epoch']}) on grid {summary['grid']} in "
        f"{summary['seconds']['total']:.1f}s\naccuracy: {scores}"
    )


def predict_rank(env: RankEnv, job: PredictJob) -> None:
    """Everything one rank of `gtool predict` does."""
    device, comm = join_grid(env, job.config)
    predict_on(comm, job, device, Reporter(env.rank == 0, None, append=False))
    dist.destroy_process_group()


def predict(job: PredictJob) -> None:
    """Run `job` on the ranks of torchrun/srun when started by one, else on local processes (as `gtool
    train`). The process that starts the local ranks, or rank 0 of torchrun/srun's, locks the output for
    the whole run: a second run writing it is refused before any rank loads or computes. Raises RankFailed
    naming the rank that failed first."""
    env = environment_rank()
    with output_lock(job.output, "gtool predict") if env is None or env.rank == 0 else nullcontext():
        start_ranks(job.config, "predict", predict_rank, job)
