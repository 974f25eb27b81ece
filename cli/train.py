"""`gtool train STORE`: 3D-parallel GCN training on a store."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import typer

from gtool.architecture import ModelConfig
from gtool.errors import ENDED_BY, GtoolError, signum_of
from gtool.geometry.epochs import batch_problem
from gtool.geometry.grid import parse_dims
from gtool.terminal import labelled
from gtool.topology import Topology
from gtool.trainer import MiniBatchConfig, OptimizerConfig, RuntimeConfig, TrainConfig

from .autogrid import GRID, PLAN_PROFILE, RANKS, auto_grid, refuse_ranks, timed_trial
from .budget import budget_request, within_budget
from .common import console, print_error, reports_errors
from .options import given_on_command_line, with_options


@reports_errors
@with_options(ModelConfig, OptimizerConfig, RuntimeConfig, MiniBatchConfig, Topology)
def train(
    context: typer.Context,
    store: str = typer.Argument(..., help="The store to train on (made by `gtool shard`)."),
    grid: str = GRID,
    ranks: int = RANKS,
    plan_profile: str = PLAN_PROFILE,
    **options: Any,
) -> None:
    """Train a GCN with 3D tensor parallelism (Plexus) on GXxGYxGZ ranks.

    Started plainly it runs the ranks as local processes; under torchrun or srun it is one rank of theirs.
    """
    from gtool.interrupts import Interrupts
    from gtool.trainer import RankFailed, environment_rank, started_ranks

    launched = environment_rank()
    try:
        config = TrainConfig.of(store, **options)
        if grid != "auto":
            refuse_ranks(ranks)
            config = config.replace(grid=parse_dims(grid, 3, "--grid"))
    except ValueError as error:
        raise GtoolError(str(error)) from None
    from gtool.store.reader import open_store

    opened = open_store(store)
    batch = config.minibatch.batch_size
    if batch is not None and (problem := batch_problem(batch, opened.num_nodes)):
        raise GtoolError(f"{problem} of {store}")  # before any rank starts and --grid auto plans
    if grid != "auto":  # its memory priced before its ranks' supervisor starts
        config = budgeted(config, opened, launched)
    started = started_ranks(config) if grid != "auto" else None  # --grid auto: its size is not known yet
    with started or nullcontext():
        from gtool.trainer import train as run_training

        if launched is None or launched.rank == 0:  # one listing per run; every rank checks what it reads
            opened.check_every_chunk()
        try:
            with Interrupts():  # SIGTERM too unwinds: the ranks (--grid auto's trial's too) are stopped
                if grid == "auto":
                    config = budgeted(planned(context, config, opened, ranks, plan_profile), opened, launched)
                run_training(config, started)
        except RankFailed as error:
            if error.details:
                console.print(error.details, highlight=False, markup=False)
            print_error(str(error))
            raise typer.Exit(2) from None
        except KeyboardInterrupt as interrupt:
            signum = signum_of(interrupt)
            ended = labelled(
                f"{ENDED_BY[signum]}:", "bold red", "the latest complete checkpoint (if any) can be resumed"
            )
            console.print(ended)
            raise typer.Exit(128 + signum) from None


def budgeted(config: TrainConfig, opened: Any, launched: Any) -> TrainConfig:
    """`config` within its --memory-limit (else refused), its --features-from auto resolved and said (by
    the first rank)."""
    config, note = within_budget(config, opened)
    if problem := config.minibatch.evaluation_problem(opened.meta.labels.multi_label):
        raise GtoolError(problem)
    if note and not config.runtime.quiet and (launched is None or launched.rank == 0):
        console.print(f"gtool train: {note}", highlight=False, soft_wrap=True)
    return config


def planned(
    context: typer.Context, config: TrainConfig, opened: Any, ranks: int, profile: str
) -> TrainConfig:
    """`config` on the grid, replicas and placement that `gtool plan` picks for `ranks` ranks."""
    if config.topology.placement is not None:
        raise GtoolError("--placement goes with an explicit --grid (--grid auto uses the plan's)")
    given = given_on_command_line(context, "data_parallel")
    chosen = config.minibatch.data_parallel if given else None
    batch = config.minibatch.batch_size
    replicas, dims, placement = auto_grid(
        opened,
        ranks,
        profile,
        lambda p: replace(budget_request(config, p, batch), replicas=chosen),
        timed_trial(config) if batch is None else None,
    )
    try:
        return config.replace(placement=placement, grid=parse_dims(dims, 3, "--grid"), data_parallel=replicas)
    except ValueError as error:
        raise GtoolError(str(error)) from None
