"""Placements: which rank holds which grid coordinates, which groups span nodes, and how the plan
chooses an order (gtool.geometry.grid, gtool.topology, gtool.plan.costmodel.placement)."""

from __future__ import annotations

import itertools

import pytest

from gtool.geometry.collectives import Collective
from gtool.geometry.grid import DEFAULT_PLACEMENT, PLACEMENTS, ProcessGrid, group_ranks
from gtool.geometry.shapes import factorizations
from gtool.plan.costmodel.placement import price_placements
from gtool.plan.costmodel.profile import load_profile
from gtool.topology import Topology, launcher_ranks_per_node

SMALL = [grid for ranks in range(1, 11) for grid in factorizations(ranks)]


def test_the_default_placement_is_the_rank_order_gtool_always_had() -> None:
    grid = ProcessGrid(2, 3, 4)
    assert grid.placement == DEFAULT_PLACEMENT
    assert [grid.coords(r) for r in range(24)] == list(itertools.product(range(2), range(3), range(4)))


def test_a_placement_lays_its_first_axis_innermost() -> None:
    """yxz on 2x3x4: y varies fastest, then x, then z: r = y + 3 (x + 2 z)."""
    grid = ProcessGrid(2, 3, 4, "yxz")
    assert all(
        grid.rank(x, y, z) == y + 3 * (x + 2 * z) for x, y, z in itertools.product(*map(range, grid.dims))
    )
    with pytest.raises(ValueError, match="a placement orders the axes"):
        ProcessGrid(2, 2, 2, "xxz")


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_placement_numbers_each_rank_once(placement: str) -> None:
    for dims in SMALL:
        grid = dims.with_placement(placement)
        assert sorted(grid.rank(*grid.coords(r)) for r in range(grid.size)) == list(range(grid.size))
        assert all(grid.rank(*grid.coords(r)) == r for r in range(grid.size))


def test_spans_nodes_agrees_with_the_nodes_of_every_group() -> None:
    """Every grid of up to 10 ranks, every placement, every node size: an axis spans nodes exactly when
    one of its groups holds ranks r, s with r // n != s // n."""
    for dims, placement in itertools.product(SMALL, PLACEMENTS):
        grid = dims.with_placement(placement)
        for per_node, axis in itertools.product(range(1, grid.size + 2), range(3)):
            nodes = [{r // per_node for r in group_ranks(grid, rank, axis)} for rank in range(grid.size)]
            spans = any(len(n) > 1 for n in nodes)
            assert grid.spans_nodes(axis, per_node) == spans, (grid, placement, per_node, axis)


def test_ranks_per_node_come_from_the_flag_the_launcher_or_the_run() -> None:
    assert Topology().ranks_per_node(16, {}) == 16
    assert Topology().ranks_per_node(16, {"LOCAL_WORLD_SIZE": "4"}) == 4
    assert Topology().ranks_per_node(16, {"SLURM_NTASKS_PER_NODE": "8(x2)"}) == 8
    assert Topology(gpus_per_node=2).ranks_per_node(16, {"LOCAL_WORLD_SIZE": "4"}) == 2
    assert Topology(gpus_per_node=32).ranks_per_node(16, {}) == 16
    assert launcher_ranks_per_node({"LOCAL_WORLD_SIZE": ""}) is None
    with pytest.raises(ValueError, match="--gpus-per-node must be >= 1"):
        Topology(gpus_per_node=0)
    with pytest.raises(ValueError, match="--placement must be one of"):
        Topology(placement="abc")


def _all_reduce(axis: int, size: int, elements: int) -> Collective:
    return Collective(0, "forward", "H = A F", "all_reduce", axis, size, elements)


def test_the_plan_places_the_busiest_axis_inside_a_node() -> None:
    """2x2x2 with 2 ranks per node: the axis that moves the most bytes goes innermost; with every order
    equally cheap (one node) gtool's default order stays."""
    profile, _ = load_profile(None)
    assert profile.inter_node_collectives and profile.collective(2, True) != profile.collective(2)
    grid = ProcessGrid(2, 2, 2)
    heavy_y = [_all_reduce(0, 2, 1000), _all_reduce(1, 2, 1 << 20), _all_reduce(2, 2, 1000)]
    best = price_placements(grid, heavy_y, profile, 4, ranks_per_node=2)[0]
    assert best.order[0] == "y" and best.spanning == (True, False, True)
    assert best.node_axes(grid) == ["y"]
    one_node = price_placements(grid, heavy_y, profile, 4, ranks_per_node=8)
    assert one_node[0].order == DEFAULT_PLACEMENT and len({p.comm for p in one_node}) == 1
