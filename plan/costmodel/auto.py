"""`gtool train --grid auto`: the grid (and, mini-batch, the replicas) `gtool plan` predicts fastest, or,
where the run can time them, the fastest measured of the grids predicted close to the best."""

from __future__ import annotations

from collections.abc import Callable

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.plan.costmodel.planner import GridEstimate, Plan, PlanRequest, make_plan
from gtool.plan.costmodel.profile import DeviceProfile
from gtool.store.reader import Store

TRIAL_SPREAD = 1.5
"""Grids predicted within this factor of the best one's epoch are timed: on ranks that share cores, the
model's error between grids of a few axes reaches 20-30% (docs/plan.md, --grid auto)."""
TRIAL_GRIDS = 8
"""At most this many grids are timed, the best predicted first."""

Timing = Callable[[list[ProcessGrid], list[float]], dict[str, float] | None]
"""Seconds of an epoch by grid (as GXxGYxGZ) of the given grids, measured, or None when they are not timed
(it would take too long, judged by the predicted seconds of each grid's epoch given, or it failed)."""


def trial_grids(plan: Plan) -> list[GridEstimate]:
    """The grids worth timing: those that fit and are predicted within TRIAL_SPREAD of the best, at most
    TRIAL_GRIDS of them (none for a mini-batch plan, whose replicas the trial does not vary)."""
    if plan.best is None or plan.request.batch_size is not None:
        return []
    close = [g for g in plan.grids if g.fits and g.time.total <= TRIAL_SPREAD * plan.best.time.total]
    return close[:TRIAL_GRIDS]


def choose_layout(
    store: Store, request: PlanRequest, profile: DeviceProfile, note: str, timing: Timing | None = None
) -> tuple[int, ProcessGrid, str]:
    """The best (replicas, grid) for `request` (replicas 1 unless it is a mini-batch run), the grid's axes
    placed over the nodes, and a line saying why (and which profile said so: `note`). With `timing`, the
    grids predicted close to the best are timed, and the fastest measured is chosen."""
    plan = make_plan(store, request, profile)
    if plan.best is None:
        raise GtoolError(f"--grid auto: {plan.reason}")
    best = plan.best
    tried = trial_grids(plan) if timing is not None else []
    measured = None
    if timing is not None and len(tried) > 1:
        measured = timing([g.grid for g in tried], [g.time.total for g in tried])
    if not measured:
        why = f"--grid auto chose {best.layout}, placed {best.grid.placement}: {plan.reason} [{note}]"
        return best.replicas, best.grid, why
    fastest = min(tried, key=lambda g: measured[str(g.grid)])
    seconds = measured[str(fastest.grid)]
    why = (
        f"--grid auto chose {fastest.layout}, placed {fastest.grid.placement}: the fastest measured epoch, "
        f"{seconds:.3g} s, of the {len(tried)} grids predicted within {TRIAL_SPREAD:g}x of the best"
    )
    if fastest is not best:
        slower = measured[str(best.grid)] / seconds - 1
        why += f" (the model's pick, {best.layout}, took {100 * slower:.0f}% longer)"
    return fastest.replicas, fastest.grid, f"{why} [{note}]"
