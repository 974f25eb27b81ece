"""`gtool predict STORE --checkpoint DIR -o OUT`: a trained model's logits (and embeddings) for every node."""

from __future__ import annotations

from typing import Any

import typer

from gtool.errors import GtoolError
from gtool.geometry.grid import parse_dims
from gtool.trainer import RuntimeConfig

from .autogrid import PLAN_PROFILE, PREDICT_GRID, RANKS, auto_grid, refuse_ranks
from .common import console, reports_errors
from .options import with_options

RUNTIME = ("backend", "device", "threads", "timeout", "quiet")
"""The options of `gtool train` that say where and how the ranks run (the model comes from the checkpoint)."""


@reports_errors
@with_options((RuntimeConfig, RUNTIME))
def predict(
    store: str = typer.Argument(
        ..., help="The store to predict on (the one trained on, or one of its shape)."
    ),
    checkpoint: str = typer.Option(
        ..., metavar="DIR", help="The --checkpoint DIR of a `gtool train` run (see --use)."
    ),
    output: str = typer.Option(
        ..., "--output", "-o", metavar="OUT", help="The Zarr group to write (logits, embeddings)."
    ),
    grid: str = PREDICT_GRID,
    ranks: int = RANKS,
    plan_profile: str = PLAN_PROFILE,
    embeddings: bool = typer.Option(
        False, "--embeddings", help="Also write the last hidden layer (the last layer's input)."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace OUT when it exists (only once the new one is complete)."
    ),
    use: str = typer.Option(
        "best",
        "--use",
        metavar="[best|latest]",
        help="best: the model of the best validation accuracy that the checkpoint folder keeps (its latest "
        "checkpoint when it has none); latest: the latest checkpoint's.",
    ),
    **options: Any,
) -> None:
    """Run a trained GCN's full-graph 3D forward on GXxGYxGZ ranks and write its logits in node order.

    Started plainly it runs the ranks as local processes; under torchrun or srun it is one rank of theirs.
    """
    from gtool.interrupts import Interrupts
    from gtool.trainer import RankFailed, checkpoint_model, prediction_job, run_prediction

    try:
        runtime = RuntimeConfig(**options)
        if grid == "auto":
            from gtool.plan import PlanRequest  # the cost model, only for a grid it picks

            model = checkpoint_model(checkpoint)
            from gtool.store.reader import open_store

            _, grid, _ = auto_grid(open_store(store), ranks, plan_profile, lambda p: PlanRequest(p, model))
        else:
            refuse_ranks(ranks)
        gx, gy, gz = parse_dims(grid, 3, "--grid")
    except ValueError as error:
        raise GtoolError(str(error)) from None
    job = prediction_job(store, checkpoint, output, (gx, gy, gz), runtime, embeddings, overwrite, use)
    try:
        with Interrupts():  # SIGTERM too unwinds: the ranks are stopped, nothing is published
            run_prediction(job)
    except RankFailed as error:
        if error.details:
            console.print(error.details, highlight=False, markup=False)
        raise
