"""`--grid auto` of `gtool train` and `gtool predict`: gtool plan's best layout for the run's ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from gtool.errors import GtoolError

from .common import console

if TYPE_CHECKING:
    from gtool.geometry.grid import ProcessGrid
    from gtool.plan import DeviceProfile, PlanRequest, Timing
    from gtool.store.reader import Store
    from gtool.trainer import TrainConfig

GRID = typer.Option(
    "1x1x1",
    metavar="GXxGYxGZ",
    help="Process grid; its ranks are GX*GY*GZ times --data-parallel. auto: the grid gtool plan predicts "
    "fastest on --ranks ranks (with --batch-size it picks the replicas too, unless --data-parallel is "
    "given). A full-graph run on local ranks first times the grids predicted close to it, once.",
)
"""--grid of `gtool train`."""
PREDICT_GRID = typer.Option(
    "1x1x1",
    metavar="GXxGYxGZ",
    help="Process grid of GX*GY*GZ ranks (any grid: the checkpoint's is not needed). auto: the grid gtool "
    "plan predicts fastest on --ranks ranks.",
)
"""--grid of `gtool predict`."""
RANKS = typer.Option(
    None, help="With --grid auto and no torchrun/srun: the number of local ranks to plan for."
)
PLAN_PROFILE = typer.Option(
    None,
    metavar="FILE",
    help="With --grid auto: device profile (gtool plan --calibrate), or shipped; default: this machine's.",
)
"""The options that go with --grid auto (of `gtool train` and `gtool predict`)."""


def auto_grid(
    store: Store,
    ranks: int | None,
    profile: str | None,
    request: Callable[[int], PlanRequest],
    timing: Timing | None = None,
) -> tuple[int, str, str]:
    """`--grid auto`: gtool plan's best (replicas, grid) for request(P), P the world size of torchrun/srun
    or --ranks (replicas 1 unless the run is mini-batch), as D, GXxGYxGZ and the grid's placement (every
    rank plans alike, so every rank finds the same). With `timing`, local ranks time the grids predicted
    close to the best (ranks of torchrun or srun would each time something else)."""
    from gtool.plan import choose_layout
    from gtool.trainer import environment_rank, refuse_beyond_memory

    env = environment_rank()
    if env is not None and env.world_size > 1:
        if ranks is not None and ranks != env.world_size:
            raise GtoolError(f"--ranks {ranks} but {env.launcher} started {env.world_size} ranks")
        ranks = env.world_size
    if ranks is None:
        raise GtoolError("--grid auto needs --ranks P when not started by torchrun or srun")
    if env is None or env.world_size == 1:
        refuse_beyond_memory(ranks)  # local ranks: before planning for them (minutes for 10^5)
    planned = request(ranks)
    alone = env is None or env.world_size == 1  # ranks of torchrun/srun must all plan with one profile
    cost_profile, note = machine_profile(profile, False, may_calibrate=alone)
    replicas, grid, why = choose_layout(store, planned, cost_profile, note, timing if alone else None)
    if env is None or env.rank == 0:
        console.print(why, highlight=False, soft_wrap=True)
    return replicas, "x".join(map(str, grid.dims)), grid.placement


def machine_profile(
    profile: str | None, recalibrate: bool, may_calibrate: bool = True, quiet: bool = False
) -> tuple[DeviceProfile, str]:
    """gtool.plan.plan_profile, its calibration (when it runs) shown on stderr unless `quiet`: a line, then
    its steps."""
    from gtool.plan import plan_profile

    if quiet:
        return plan_profile(profile, recalibrate, lambda what: None, may_calibrate)
    with console.status("") as status:

        def report(what: str) -> None:
            if what.startswith("calibrating"):
                console.print(what, highlight=False, soft_wrap=True)
            status.update(what)

        return plan_profile(profile, recalibrate, report, may_calibrate)


def timed_trial(config: TrainConfig) -> Timing:
    """The timing of --grid auto for `config`: its grids' epochs from this machine's trials (said on
    stderr, with a spinner while they run, unless --quiet)."""
    from gtool.plan import time_grids

    def timing(grids: list[ProcessGrid], predicted: list[float]) -> dict[str, float] | None:
        if config.runtime.quiet:
            return time_grids(config, grids, predicted, lambda what: None)
        with console.status("--grid auto: grids " + ", ".join(map(str, grids))):
            return time_grids(config, grids, predicted, lambda what: console.print(what, highlight=False))

    return timing


def refuse_ranks(ranks: int | None) -> None:
    """An explicit grid names its ranks: --ranks is only for --grid auto."""
    if ranks is not None:
        raise GtoolError("--ranks goes with --grid auto (a grid names its ranks)")
