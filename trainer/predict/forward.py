"""`gtool predict`: a trained model's full-graph forward pass on any grid, written in the original node order.

Each rank computes its logits block (with --embeddings, the last layer's input block too) as training
evaluates; `writer` writes the blocks into a staging folder that rank 0 publishes once complete: OUT/logits
(N x classes, row i: original node i), OUT/probabilities (multi-label stores: each task's sigmoid),
OUT/embeddings, and zarr.json's "gtool_predictions" attributes.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
import zarr

from gtool.errors import GtoolError
from gtool.geometry.bands import Band
from gtool.geometry.layers import order_of_layer_output
from gtool.store import layout
from gtool.store.reader import open_store
from gtool.store.writing.chunk_writer import ChunkSink
from gtool.store.writing.staging import (
    PREDICT_OUTPUT,
    StagedOutput,
    staging_path,
    storage_error,
)
from gtool.trainer.checkpoints.regrid import TrainedParameters
from gtool.trainer.checkpoints.shared import require_shared
from gtool.trainer.comm.groups import GridComm
from gtool.trainer.fit.report import METRIC_NAMES, Reporter
from gtool.trainer.fit.trainer import load_model_rank, logit_targets
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.joined import join_grid
from gtool.trainer.launch.lineage import refuse_orphaned
from gtool.trainer.models.gcn import ParallelGCN
from gtool.trainer.models.places import stack_geometry
from gtool.trainer.predict.job import PredictJob
from gtool.trainer.predict.writer import HeldBlock, write_node_rows

LOGITS = ("logits", "probabilities")
"""The outputs of the logits' layout: the logits, and on a multi-label store each task's probability."""


def _held(
    model: ParallelGCN, comm: GridComm, which: str, values: torch.Tensor
) -> tuple[HeldBlock, list[Band], int]:
    """This rank's block of `which` (logits, or probabilities, their sigmoid; embeddings: the input of the
    output head, or of the last GCN layer without one), the column band of every rank's block of it and
    the array's width."""
    mine = model.geometry
    orders = tuple(g.transform_first for g in mine.layers)
    meta = (model.num_nodes, mine.num_features, mine.num_classes)
    everyone = [
        stack_geometry(mine.config, comm.grid, r, *meta, False, orders) for r in range(comm.grid.size)
    ]
    last = len(mine.layers) - 1
    geometry = mine.layers[last]
    if which in LOGITS:
        width, order, rows = mine.num_classes, order_of_layer_output(last), mine.output_rows
        replica = mine.head.roles[2] if mine.head is not None else geometry.replica_axis
        columns = [g.output_cols() for g in everyone]
    elif mine.head is not None:
        width, order, rows = model.dims[-1], order_of_layer_output(last), geometry.rows
        replica = geometry.replica_axis
        columns = [g.layers[last].out_cols(width) for g in everyone]
    else:
        width, order, rows = model.dims[last], order_of_layer_output(last - 1), geometry.inputs
        replica = geometry.roles[0]
        columns = [g.layers[last].in_cols(width) for g in everyone]
    writes = comm.coords[replica] == 0
    return HeldBlock(values, rows, order, columns[comm.rank], writes), columns, width


def _outputs(model: ParallelGCN, embeddings: bool) -> dict[str, torch.Tensor]:
    """This rank's logits block and, with `embeddings`, its block of the output head's input (of the last
    GCN layer's without a head): the forward pass training evaluates with (no dropout)."""
    last = len(model.layers) - 1
    with torch.no_grad():
        if not embeddings:
            return {"logits": model.forward(0, training=False)}
        if model.geometry.head is not None:
            hidden = model.propagate(range(last + 1), 0, training=False)
            return {"embeddings": hidden, "logits": model.output(hidden)}
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
    TrainedParameters(job.manifest, data.meta.num_features, data.meta.num_classes).load_into(model)
    outputs = _outputs(model, job.embeddings)
    metric = "rocauc" if data.meta.labels.multi_label else "accuracy"
    if metric == "rocauc":
        outputs["probabilities"] = torch.sigmoid(outputs["logits"])
    try:
        scores, unscored = logit_targets(data, model, comm, device).scores(outputs["logits"]), None
    except GtoolError as error:  # no labels, or none to train on: the logits are written all the same
        scores, unscored = None, str(error)
    del data
    computed = time.perf_counter() - started
    staged = StagedOutput(job.output, job.overwrite, PREDICT_OUTPUT) if comm.rank == 0 else None
    try:
        if staged is not None:
            zarr.open_group(store=staged.path, mode="w")
        require_shared(comm.everyone, staging_path(job.output), "-o", SHARED_OUTPUT)
        summary = {
            "store": config.store,
            "checkpoint": job.manifest["path"],
            "epoch": job.manifest["epoch"],
            "use": job.manifest["use"],
            "grid": "x".join(map(str, comm.grid.dims)),
            "rows": _write(comm, job, outputs, model),
            metric: scores,
            "unscored": unscored,
            "seconds": {"forward": computed, "total": time.perf_counter() - started},
        }
        if staged is not None:
            zarr.open_group(store=staged.path, mode="r+").attrs[layout.PREDICTIONS_KEY] = {
                **summary,
                "complete": True,
            }
            refuse_orphaned(f"the prediction {job.output}")
            staged.publish()
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    geometry = model.geometry
    embedding = model.dims[-1] if geometry.head is not None else model.dims[-2]
    reporter.message(
        _summary_text(
            job.output, summary, {**dict.fromkeys(LOGITS, geometry.num_classes), "embeddings": embedding}
        )
    )
    return summary


SHARED_OUTPUT = (
    "Give an output on a file system that every node mounts at the same path (as an absolute path), or an "
    "fsspec URL every node reaches (s3://...), or run the ranks on one node."
)


MODELS = {"best": "the best validation model", "latest": "the latest checkpoint"}


def _summary_text(output: str, summary: dict[str, Any], widths: dict[str, int]) -> str:
    """The closing lines: what was written from what, and per split the accuracy of the logits' argmax
    (multi-label: the ROC-AUC averaged over tasks)."""
    shapes = ", ".join(f"{name} {rows} x {widths[name]}" for name, rows in summary["rows"].items())
    metric = "rocauc" if "rocauc" in summary else "accuracy"
    if summary[metric] is None:
        scores = f"n/a ({summary['unscored']})"
    else:
        scores = "  ".join(f"{split} {value:.4f}" for split, value in summary[metric].items())
    return (
        f"gtool predict: wrote {output} ({shapes}; rows in the original node order) from "
        f"{summary['checkpoint']} (epoch {summary['epoch']}, {MODELS[summary['use']]}) on grid "
        f"{summary['grid']} in {summary['seconds']['total']:.1f}s\n{METRIC_NAMES[metric]}: {scores}"
    )


def predict_rank(env: RankEnv, job: PredictJob) -> None:
    """Everything one rank of `gtool predict` does."""
    device, comm = join_grid(env, job.config)
    predict_on(comm, job, device, Reporter(env.rank == 0, None, append=False))
    dist.destroy_process_group()
