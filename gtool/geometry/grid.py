"""The 3D process grid: which rank holds which coordinates (x, y, z).

Ranks are laid out along the axes of a `placement`, innermost first: with the default, zyx, z varies
fastest and r = (x * Gy + y) * Gz + z. Launchers number the ranks of a node consecutively, so the
innermost axes are the ones whose groups stay inside a node (`spans_nodes`).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

Ranks = TypeVar("Ranks", int, "np.ndarray")
"""A rank number, or an integer array of them."""

AXES = ("x", "y", "z")
DEFAULT_PLACEMENT = "zyx"
"""z innermost, then y, then x: gtool's rank order before placements could be chosen."""
PLACEMENTS = tuple("".join(order) for order in permutations(AXES))
"""Every order of the axes (innermost first)."""


@dataclass(frozen=True)
class ProcessGrid:
    """A Gx x Gy x Gz process grid whose ranks are laid out along `placement` (innermost axis first)."""

    gx: int
    gy: int
    gz: int
    placement: str = DEFAULT_PLACEMENT

    def __post_init__(self) -> None:
        if min(self.gx, self.gy, self.gz) < 1:
            raise ValueError(f"grid dimensions must be >= 1, got {self.dims}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"a placement orders the axes x, y, z (e.g. yxz), got {self.placement!r}")

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.gx, self.gy, self.gz)

    @property
    def size(self) -> int:
        return self.gx * self.gy * self.gz

    @property
    def strides(self) -> tuple[int, int, int]:
        """How far apart in rank numbers two ranks one step apart along x, y and z are."""
        strides = [0, 0, 0]
        step = 1
        for name in self.placement:
            axis = AXES.index(name)
            strides[axis] = step
            step *= self.dims[axis]
        return strides[0], strides[1], strides[2]

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(x, y, z) of a rank."""
        try:
            rank = operator.index(rank)
        except TypeError:
            raise TypeError(f"a rank is an integer, got {rank!r}") from None
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} outside a grid of {self.size} processes")
        return self.coords_of(rank)

    def coords_of(self, ranks: Ranks) -> tuple[Ranks, Ranks, Ranks]:
        """(x, y, z) of a rank, or of each of an integer array of ranks (unchecked)."""
        x, y, z = ((ranks // s) % g for s, g in zip(self.strides, self.dims, strict=True))
        return x, y, z

    def rank(self, x: int, y: int, z: int) -> int:
        """The rank at coordinates (x, y, z)."""
        return sum(c * s for c, s in zip((x, y, z), self.strides, strict=True))

    def with_placement(self, placement: str) -> ProcessGrid:
        return ProcessGrid(self.gx, self.gy, self.gz, placement)

    def spans_nodes(self, axis: int, ranks_per_node: int) -> bool:
        """Whether some group along `axis` has ranks on two nodes, node k holding ranks k n .. k n + n - 1.

        A group is the ranks base + k s (k < G, s the axis's stride, base a rank at coordinate 0 on the
        axis); bases are q s G + i (i < s), so the group leaves base's node exactly when
        (q s G) mod n + s G > n for some q, a pattern that repeats within n values of q."""
        size, stride = self.dims[axis], self.strides[axis]
        if size == 1:
            return False
        block = stride * size
        blocks = self.size // block
        return any(
            (q * block) % ranks_per_node + block > ranks_per_node for q in range(min(blocks, ranks_per_node))
        )

    def __str__(self) -> str:
        return f"{self.gx}x{self.gy}x{self.gz}"


def as_grid(grid: ProcessGrid | Sequence[int]) -> ProcessGrid:
    """`grid` itself when a ProcessGrid, else the grid of its three integers (Gx, Gy, Gz)."""
    if isinstance(grid, ProcessGrid):
        return grid
    try:
        gx, gy, gz = (operator.index(g) for g in grid)
    except (TypeError, ValueError):
        raise TypeError(f"a grid is a ProcessGrid or three integers (Gx, Gy, Gz), got {grid!r}") from None
    return ProcessGrid(gx, gy, gz)


def group_ranks(grid: ProcessGrid, rank: int, axis: int) -> list[int]:
    """Ranks that share every coordinate with `rank` except `axis` (the group along that axis)."""
    coords = list(grid.coords(rank))
    members = []
    for v in range(grid.dims[axis]):
        coords[axis] = v
        members.append(grid.rank(*coords))
    return members


def parse_dims(text: str, count: int, what: str) -> tuple[int, ...]:
    """Parse 'AxB' / 'AxBxC' into positive ints; a single number N means N repeated `count` times."""
    parts = text.lower().replace("*", "x").split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{what} must look like {'x'.join(['N'] * count)}, got {text!r}") from None
    if len(dims) == 1:
        dims = dims * count
    if len(dims) != count or any(d < 1 for d in dims):
        example = "x".join(["2"] * count)
        raise ValueError(f"{what} must be {count} positive integers like {example}, got {text!r}")
    return dims
