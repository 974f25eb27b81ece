"""`gtool train STORE`: 3D-parallel GCN training on a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from gtool.errors import GtoolError
from gtool.geometry.grid import parse_dims
from gtool.store.reader import Store, open_store

from .common import console, reports_errors
from .plan import plan_request

if TYPE_CHECKING:
    from gtool.plan.model.planner import PlanRequest


def auto_grid(
    store: Store, ranks: int | None, profile: str | None, request: Callable[[int], PlanRequest]
) -> str:
    """`--grid auto`: gtool plan's best grid for request(P), P the world size of torchrun/srun or --ranks."""
    from gtool.plan.model.auto import choose_grid
    from gtool.trainer.launch import environment_rank

    env = environment_rank()
    if env is not None and env.world_size > 1:
        if ranks is not None and ranks != env.world_size:
            raise GtoolError(f"--ranks {ranks} but {env.launcher} started {env.world_size} ranks")
        ranks = env.world_size
    if ranks is None:
        raise GtoolError("--grid auto needs --ranks P when not started by torchrun or srun")
    grid, why = choose_grid(store, request(ranks), profile)
    if env is None or env.rank == 0:
        console.print(why, highlight=False, soft_wrap=True)
    return "x".join(map(str, grid.dims))


@reports_errors
def train(
    store: str = typer.Argument(..., help="The store to train on (made by `gtool shard`)."),
    grid: str = typer.Option(
        "1x1x1",
        help="Process grid GXxGYxGZ (its product is the number of ranks), or auto: gtool plan's best.",
    ),
    ranks: int = typer.Option(
        None, help="With --grid auto and no torchrun/srun: the number of local ranks to plan for."
    ),
    plan_profile: str = typer.Option(None, help="With --grid auto: device profile (gtool plan --calibrate)."),
    layers: int = typer.Option(3, help="GCN layers."),
    hidden: int = typer.Option(128, help="Width of the hidden layers."),
    dropout: float = typer.Option(0.5, help="Dropout rate on every layer's input."),
    lr: float = typer.Option(0.01, help="Learning rate."),
    weight_decay: float = typer.Option(5e-4, help="Weight decay (Adam: L2 term; AdamW: decoupled)."),
    weight_decay_first_only: bool = typer.Option(
        False, "--weight-decay-first-only", help="Decay only the first layer's weight (Kipf & Welling)."
    ),
    optimizer: str = typer.Option("adam", help="adam or adamw."),
    epochs: int = typer.Option(100, help="Training epochs."),
    eval_every: int = typer.Option(1, help="Evaluate accuracies every N epochs and at the end."),
    seed: int = typer.Option(0, help="Seed of weight initialization and dropout masks."),
    learnable_features: bool = typer.Option(
        False, "--learnable-features", help="Train the input features as embeddings (sharded)."
    ),
    normalize_features: str = typer.Option("none", help="none, or row: divide each row by its L1 norm."),
    agg_blocks: int = typer.Option(1, help="Row blocks per SpMM, each reduced while the next is computed."),
    dtype: str = typer.Option("float32", help="float32 or float64."),
    backend: str = typer.Option("gloo", help="gloo (CPU) or nccl (one GPU per rank, cuda:LOCAL_RANK)."),
    device: str = typer.Option(
        None, help="cpu or cuda; default cuda for nccl, cpu for gloo (gloo with cuda: ranks may share GPUs)."
    ),
    threads: int = typer.Option(1, help="Torch threads per rank."),
    timeout: float = typer.Option(60.0, help="Seconds a rank waits in a collective before giving up."),
    checkpoint: str = typer.Option(None, help="Directory of sharded checkpoints."),
    checkpoint_every: int = typer.Option(10, help="Write a checkpoint every N epochs (and at the end)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue from the latest checkpoint in --checkpoint, if there is one."
    ),
    log: str = typer.Option(None, help="JSON lines: one per epoch, then a summary (appended on --resume)."),
) -> None:
    """Train a GCN with 3D tensor parallelism (Plexus) on GXxGYxGZ ranks.

    Started plainly it runs the ranks as local processes; under torchrun or srun it is one rank of theirs.
    """
    from gtool.trainer.config import TrainConfig
    from gtool.trainer.launch import RankFailed
    from gtool.trainer.run import train as run_training

    opened = open_store(store)
    if grid == "auto":
        model = (layers, hidden, dtype, dropout, learnable_features, agg_blocks, None)
        dims = auto_grid(opened, ranks, plan_profile, lambda p: plan_request(p, *model))
    else:
        if ranks is not None:
            raise GtoolError("--ranks goes with --grid auto (a grid names its ranks)")
        dims = grid
    try:
        config = TrainConfig(
            store=store,
            grid=parse_dims(dims, 3, "--grid"),
            layers=layers,
            hidden=hidden,
            dropout=dropout,
            lr=lr,
            weight_decay=weight_decay,
            weight_decay_first_only=weight_decay_first_only,
            optimizer=optimizer,
            epochs=epochs,
            eval_every=eval_every,
            seed=seed,
            learnable_features=learnable_features,
            normalize_features=normalize_features,
            agg_blocks=agg_blocks,
            dtype=dtype,
            backend=backend,
            device=device,
            threads=threads,
            timeout=timeout,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
            resume=resume,
            log=log,
        )
    except ValueError as error:
        raise GtoolError(str(error)) from None
    try:
        run_training(config)
    except RankFailed as error:
        if error.details:
            console.print(error.details, highlight=False, markup=False)
        console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        console.print("[bold red]interrupted[/]: the latest complete checkpoint (if any) can be resumed")
        raise typer.Exit(130) from None
