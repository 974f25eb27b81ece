"""`gtool plan STORE --ranks P [...]` and `gtool plan --calibrate -o profile.json`."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.status import Status

from gtool.architecture import COMPONENT_OPTIONS, ModelConfig
from gtool.collector import settle
from gtool.errors import GtoolError
from gtool.geometry.epochs import batch_problem
from gtool.terminal import plain_console
from gtool.topology import Topology

from .autogrid import machine_profile
from .common import QUIET, console, reports_errors
from .jsonstream import write_json
from .options import with_options
from .plan_tables import plan_tables

if TYPE_CHECKING:
    from gtool.plan import PlanRequest

WIDTH = 100
"""Columns of the tables at most, on a terminal as in a file or a pipe: the ranked grids keep every figure
whole and wrap their headers to fit."""


def _calibrate(output: str | None, device: str, threads: int, max_group: int, quiet: bool) -> None:
    from gtool.plan import calibrate, save_profile
    from gtool.store.writing.staging import check_output_file
    from gtool.trainer import cuda_notice

    if not output:
        raise GtoolError("--calibrate needs -o FILE.json, where the profile goes")
    if device not in ("cpu", "cuda"):
        raise GtoolError(f"--device must be cpu or cuda, got {device!r}")
    for flag, value in (("--threads", threads), ("--max-group", max_group)):
        if value < 1:
            raise GtoolError(f"{flag} must be >= 1, got {value}")
    check_output_file(Path(output), "-o", "the profile")
    settle()  # imports done: the calibration takes minutes (gtool.collector)
    if device == "cuda" and (notice := cuda_notice()):
        console.print(notice, highlight=False)
    started = time.perf_counter()
    status = Status("calibrating", console=console)
    with contextlib.nullcontext() if quiet else status:
        try:
            profile, measurements = calibrate(device, threads, max_group, lambda what: status.update(what))
        except ValueError as exc:
            raise GtoolError(str(exc)) from None
    save_profile(profile, output, measurements)
    groups = ", ".join(str(g) for g in sorted(profile.collectives)) or "none"
    console.print(
        f"gtool plan: wrote {output} ({profile.describe()}; all-reduce groups {groups}) "
        f"in {time.perf_counter() - started:.0f} s. All-reduces were measured inside this machine only "
        "(intra-node rows); for groups across nodes add inter_node_collectives (docs/plan.md, Profiles)",
        highlight=False,
    )


PLANNED = (
    "layers",
    "hidden",
    "dtype",
    "comm_dtype",
    "dropout",
    "learnable_features",
    "agg_blocks",
    "layer_order",
    *COMPONENT_OPTIONS,
)
"""The model options a plan depends on (gtool train's flags of the same names)."""


@reports_errors
@with_options((ModelConfig, PLANNED), (Topology, ("gpus_per_node", "memory_limit")))
def plan(
    store: str = typer.Argument(None, help="The store to plan for (not with --calibrate)."),
    ranks: int = typer.Option(None, "--ranks", "-p", help="Number of ranks (GPUs) to plan for."),
    profile: str = typer.Option(
        None,
        metavar="FILE",
        help="Device profile JSON (gtool plan --calibrate), or shipped for gtool's own; default: this "
        "machine's, calibrated on first use.",
    ),
    recalibrate: bool = typer.Option(
        False, "--recalibrate", help="Calibrate this machine again (a few seconds) before planning."
    ),
    memory_per_rank: str = typer.Option(
        None, metavar="SIZE", help="Memory one rank may use, e.g. 80GB: marks grids over it."
    ),
    exact_nnz: bool = typer.Option(
        False, "--exact-nnz", help="Count shard nonzeros in tiles that band edges cross (reads those tiles)."
    ),
    top: int = typer.Option(0, help="Show only the N best grids (0: all)."),
    batch_size: int = typer.Option(
        None, help="Plan a mini-batch run (gtool train --batch-size B): D x grid layouts of P ranks too."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print everything as JSON."),
    calibrate: bool = typer.Option(False, "--calibrate", help="Measure this machine and write a profile."),
    quiet: bool = QUIET,
    device: str = typer.Option(
        "cpu", metavar="[cpu|cuda]", help="With --calibrate: cpu (gloo) or cuda (NCCL over the GPUs seen)."
    ),
    threads: int = typer.Option(1, help="With --calibrate: torch threads per rank."),
    max_group: int = typer.Option(8, help="With --calibrate: largest all-reduce group (local processes)."),
    output: str = typer.Option(
        None, "--output", "-o", metavar="FILE", help="With --calibrate: the profile file to write."
    ),
    **model: Any,
) -> None:
    """Predict epoch time, communication and peak memory of every GXxGYxGZ grid of P ranks; pick one.

    Costs come from this machine's profile, measured in a few seconds on first use (or one made by
    `gtool plan --calibrate`; formulas: docs/plan.md). Each grid's axes are placed over nodes of
    --gpus-per-node ranks the way that communicates fastest.
    """
    if calibrate:
        _calibrate(output, device, threads, max_group, quiet)
        return
    from gtool.plan import make_plan

    if store is None or ranks is None:
        raise GtoolError("gtool plan needs STORE and --ranks P (or --calibrate -o FILE)")
    gpus_per_node, memory_limit = model.pop("gpus_per_node"), model.pop("memory_limit", None)
    request = plan_request(ranks, model, memory_per_rank, exact_nnz, gpus_per_node, batch_size, memory_limit)
    if recalibrate and profile:
        raise GtoolError("--recalibrate measures this machine: it does not go with --profile")
    cost_profile, note = machine_profile(profile, recalibrate, quiet=quiet)

    from gtool.store.reader import open_store

    opened = open_store(store)
    if batch_size is not None and (problem := batch_problem(batch_size, opened.num_nodes)):
        raise GtoolError(f"{problem} of {store}")
    result = make_plan(opened, request, cost_profile)
    if as_json:
        write_json({"store": store, "profile": note, **result.summary()}, sys.stdout)
        return
    if not quiet:
        console.print(note, highlight=False, soft_wrap=True)
    out = plain_console()
    width = min(out.width, WIDTH)
    for table in plan_tables(store, opened.num_nodes, result, top, width):
        out.print(table, width=width)


def plan_request(
    ranks: int,
    model: dict[str, Any],
    memory_per_rank: str | None,
    exact_nnz: bool = False,
    gpus_per_node: int | None = None,
    batch_size: int | None = None,
    memory_limit: int | None = None,
) -> PlanRequest:
    """The options as a PlanRequest, with clear errors for bad ones; the node's memory `memory_limit`, by
    default this machine's (gtool.memory) when the ranks run here (no --gpus-per-node)."""
    from gtool.memory import machine_memory
    from gtool.plan import PlanRequest
    from gtool.units import parse_bytes

    if ranks < 1:
        raise GtoolError(f"--ranks must be >= 1, got {ranks}")
    try:
        limit = parse_bytes(memory_per_rank) if memory_per_rank else None
    except ValueError as exc:
        raise GtoolError(f"--memory-per-rank: {exc}") from None
    try:
        config = ModelConfig(**model)
        topology = Topology(gpus_per_node=gpus_per_node, memory_limit=memory_limit)
    except ValueError as exc:
        raise GtoolError(str(exc)) from None
    if batch_size is not None and batch_size < 2:
        raise GtoolError(f"--batch-size must be >= 2, got {batch_size}")
    per_node = topology.ranks_per_node(ranks)
    here = gpus_per_node is None
    budget = topology.memory_limit or (machine_memory().total if here else None)
    return PlanRequest(ranks, config, limit, exact_nnz, per_node, batch_size, memory_limit=budget)
