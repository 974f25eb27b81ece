"""bench.plan_metadata: a store of metadata only that `gtool plan` plans for, as docs/plan.md's example."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.plan_metadata import main
from gtool.errors import StoreError
from gtool.loader import load_rank
from gtool.plan.costmodel.planner import PlanRequest, make_plan
from gtool.plan.costmodel.profile import load_profile
from gtool.store.reader import open_store


def test_a_metadata_store_is_planned_for_and_cannot_be_trained_on(tmp_path: Path) -> None:
    path = str(tmp_path / "like.zarr")
    main([path, "--nodes", "10007", "--edges", "50000", "--features", "16", "--classes", "5", "--tiles", "4"])
    store = open_store(path)
    assert store.tile_nnz(0).sum() == store.tile_nnz(1).sum() == 2 * 50000 + 10007
    assert (store.tile_nnz(0) == store.tile_nnz(1).T).all()
    plan = make_plan(store, PlanRequest(16, ranks_per_node=4), load_profile(None)[0])
    assert plan.best is not None and plan.best.node_axes
    with pytest.raises(StoreError, match="missing array"):
        load_rank(path, (1, 1, 1), 0, 2)
