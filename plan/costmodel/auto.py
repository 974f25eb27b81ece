"""`gtool train --grid auto`: the grid (and, mini-batch, the replicas) `gtool plan` predicts fastest."""

from __future__ import annotations

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.plan.costmodel.planner import PlanRequest, make_plan
from gtool.plan.costmodel.profile import DeviceProfile
from gtool.store.reader import Store


def choose_layout(
    store: Store, request: PlanRequest, profile: DeviceProfile, note: str
) -> tuple[int, ProcessGrid, str]:
    """The best (replicas, grid) for `request` (replicas 1 unless it is a mini-batch run), the grid's axes
    placed over the nodes, and a line saying why (and which profile said so: `note`)."""
    plan = make_plan(store, request, profile)
    if plan.best is None:
        raise GtoolError(f"--grid auto: {plan.reason}")
    best = plan.best
    return (
        best.replicas,
        best.grid,
        f"--grid auto chose {best.layout}, placed {best.grid.placement}: {plan.reason} [{note}]",
    )
