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
from gtool.geometry.bands import Band, band
from gtool.store import layout
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
from gtool.trainer.fit.trainer import model_grid
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.joined import join_grid
from gtool.trainer.launch.lineage import refuse_orphaned
from gtool.trainer.models.grid import Grid, Layout
from gtool.trainer.models.network import Network, build_network
from gtool.trainer.predict.job import PredictJob
from gtool.trainer.predict.writer import HeldBlock, write_node_rows

LOGITS = ("logits", "probabilities")
"""The outputs of the logits' layout: the logits, and on a multi-label store each task's probability."""


def _held(grid: Grid, layout: Layout, values: torch.Tensor) -> tuple[HeldBlock, list[Band], int]:
    """This rank's block `values` of an output in `layout`, the column band of every rank's block of it
    and the array's width: rows of node band b in the layout's order, columns of band c, replicated over
    the a-axis (whose first rank writes)."""
    a, b, c = layout.roles
    dims = grid.grid.dims
    columns = [band(grid.grid.coords(r)[c], dims[c], layout.width) for r in range(grid.grid.size)]
    writes = grid.coords[a] == 0
    held = HeldBlock(values, grid.node_band(b), layout.order, columns[grid.rank], writes)
    return held, columns, layout.width


def _outputs(network: Network, embeddings: bool) -> dict[str, tuple[torch.Tensor, Layout]]:
    """This rank's logits block and, with `embeddings`, its block of the model's last hidden layer (the
    output head's input; the last GCN layer's without a head), with their layouts: the forward pass
    training evaluates with (no dropout)."""
    network.eval()
    with torch.no_grad():
        if not embeddings:
            return {"logits": (network(), network.output)}
        if network.hidden is None:
            raise GtoolError(
                "--embeddings: this model names no hidden layer (a `hidden` Layout and a "
                "hidden_and_logits method)"
            )
        hidden, logits = network.hidden_and_logits()
        return {"embeddings": (hidden, network.hidden), "logits": (logits, network.output)}


def _write(grid: Grid, job: PredictJob, outputs: dict[str, tuple[torch.Tensor, Layout]]) -> dict[str, int]:
    """Every output array written into the staging location; the rows of each (every rank calls it)."""
    comm, sink = grid.comm, ChunkSink(staging_path(job.output))
    rows = {}
    for name, (values, where) in outputs.items():
        held, columns, width = _held(grid, where, values)
        try:
            written = write_node_rows(sink, name, grid.store, held, columns, width, comm.everyone)
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
    grid = model_grid(config, comm, device)
    network = build_network(grid, config.model)
    TrainedParameters(job.manifest).load_into(network)
    outputs = _outputs(network, job.embeddings)
    logits = outputs["logits"][0]
    metric = "rocauc" if grid.store.meta.labels.multi_label else "accuracy"
    if metric == "rocauc":
        outputs["probabilities"] = (torch.sigmoid(logits), network.output)
    try:
        scores, unscored = grid.targets(network.output).scores(logits), None
    except GtoolError as error:  # no labels, or none to train on: the logits are written all the same
        scores, unscored = None, str(error)
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
            "rows": _write(grid, job, outputs),
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
    widths = {name: layout.width for name, (_, layout) in outputs.items()}
    reporter.message(_summary_text(job.output, summary, widths))
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
