"""The 3D process grid of ../shared/docs/3d-gcn.md: rank coordinates and each layer's shard.

Rank r has coordinates (x, y, z) with r = (x * Gy + y) * Gz + z. Layer l plays the axes in the roles
(a, b, c) = (x, y, z) rotated l times by (x, y, z) -> (z, x, y): its adjacency shard is
A_{l mod 2}[band a (of G_a), band b (of G_b)], it contracts over b (all-reduce among ranks sharing a and c),
its input block is F_l[band b, feature band c] and its output block F_{l+1}[band a, feature band b].
"""

from __future__ import annotations

from dataclasses import dataclass

from gtool.geometry import Band, band

AXES = ("x", "y", "z")


@dataclass(frozen=True)
class ProcessGrid:
    """A Gx x Gy x Gz process grid."""

    gx: int
    gy: int
    gz: int

    def __post_init__(self) -> None:
        if min(self.gx, self.gy, self.gz) < 1:
            raise ValueError(f"grid dimensions must be >= 1, got {self.dims}")

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.gx, self.gy, self.gz)

    @property
    def size(self) -> int:
        return self.gx * self.gy * self.gz

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(x, y, z) of a rank."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} outside a grid of {self.size} processes")
        x, rest = divmod(rank, self.gy * self.gz)
        y, z = divmod(rest, self.gz)
        return x, y, z

    def rank(self, x: int, y: int, z: int) -> int:
        """The rank at coordinates (x, y, z)."""
        return (x * self.gy + y) * self.gz + z

    def __str__(self) -> str:
        return f"{self.gx}x{self.gy}x{self.gz}"


def layer_roles(layer: int) -> tuple[int, int, int]:
    """Axis indices (a, b, c) playing (row, contraction, depth) in `layer` (0 -> (x, y, z))."""
    a, b, c = 0, 1, 2
    for _ in range(layer % 3):
        a, b, c = c, a, b
    return a, b, c


def layer_matrix(layer: int) -> int:
    """Which stored matrix a layer multiplies by: A0 for even layers, A1 for odd (A0 only if pr == pc)."""
    return layer % 2


@dataclass(frozen=True)
class LayerShard:
    """What one rank holds for one layer."""

    layer: int
    matrix: int
    row_band: Band
    col_band: Band
    roles: tuple[int, int, int]
    coords: tuple[int, int, int]

    @property
    def key(self) -> tuple[int, int, int]:
        """(matrix, row band, col band): equal keys are the same adjacency shard."""
        return (self.matrix, self.row_band.index, self.col_band.index)


def layer_shard(grid: ProcessGrid, rank: int, layer: int, num_nodes: int, two_matrices: bool) -> LayerShard:
    """The adjacency shard rank `rank` multiplies by in `layer`."""
    coords = grid.coords(rank)
    dims = grid.dims
    a, b, c = layer_roles(layer)
    matrix = layer_matrix(layer) if two_matrices else 0
    return LayerShard(
        layer=layer,
        matrix=matrix,
        row_band=band(coords[a], dims[a], num_nodes),
        col_band=band(coords[b], dims[b], num_nodes),
        roles=(a, b, c),
        coords=coords,
    )


def group_ranks(grid: ProcessGrid, rank: int, axis: int) -> list[int]:
    """Ranks that share every coordinate with `rank` except `axis` (the group along that axis)."""
    coords = list(grid.coords(rank))
    members = []
    for v in range(grid.dims[axis]):
        coords[axis] = v
        members.append(grid.rank(*coords))
    return members
