"""Which grid axes to place inside a node: every order of the axes priced, the cheapest chosen.

Launchers number a node's ranks consecutively, so the axes a placement lists first (innermost) keep their
groups inside a node, and a group whose ranks sit on several nodes pays the profile's inter-node rows
(gtool.plan.costmodel.cost.collective_seconds). Only the collectives' time depends on the placement: every
rank computes the same blocks and every group moves the same bytes whatever the order.
"""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry.collectives import Collective
from gtool.geometry.grid import AXES, DEFAULT_PLACEMENT, PLACEMENTS, ProcessGrid
from gtool.plan.costmodel.cost import collective_seconds
from gtool.plan.costmodel.profile import DeviceProfile


@dataclass(frozen=True)
class Placement:
    """One order of the axes over the ranks (innermost first), what spans nodes, and the collectives'
    seconds that follow (before the real-epoch latency)."""

    order: str
    spanning: tuple[bool, ...]
    comm: float

    def node_axes(self, grid: ProcessGrid) -> list[str]:
        """The axes of more than one rank whose groups stay inside a node."""
        return [a for a, spans, g in zip(AXES, self.spanning, grid.dims, strict=True) if g > 1 and not spans]


def price_placements(
    grid: ProcessGrid,
    collectives: list[Collective],
    profile: DeviceProfile,
    itemsize: int,
    ranks_per_node: int,
) -> list[Placement]:
    """Every placement of `grid` with `ranks_per_node` ranks per node, cheapest first; among equals
    gtool's default order first, then the others in PLACEMENTS order."""
    orders = [DEFAULT_PLACEMENT] + [p for p in PLACEMENTS if p != DEFAULT_PLACEMENT]
    priced = []
    for order in orders:
        placed = grid.with_placement(order)
        spanning = tuple(placed.spans_nodes(axis, ranks_per_node) for axis in range(len(AXES)))
        priced.append(
            Placement(
                order, spanning, collective_seconds(collectives, profile, itemsize, spanning, ranks_per_node)
            )
        )
    return sorted(priced, key=lambda p: p.comm)
