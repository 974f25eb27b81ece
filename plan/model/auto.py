"""`gtool train --grid auto`: the grid `gtool plan` predicts fastest for the run's ranks and model."""

from __future__ import annotations

from gtool.errors import GtoolError
from gtool.geometry.grid import ProcessGrid
from gtool.plan.model.planner import PlanRequest, make_plan
from gtool.plan.model.profile import load_profile
from gtool.store.reader import Store


def choose_grid(store: Store, request: PlanRequest, profile: str | None) -> tuple[ProcessGrid, str]:
    """The best grid for `request`, its axes placed over the nodes, and a line saying why (and which
    profile said so)."""
    cost_profile, note = load_profile(profile)
    plan = make_plan(store, request, cost_profile)
    if plan.best is None:
        raise GtoolError(f"--grid auto: {plan.reason}")
    best = plan.best.grid
    return best, f"--grid auto chose {best}, placed {best.placement}: {plan.reason} [{note}]"
