"""The 3D process grid: rank r has coordinates (x, y, z) with r = (x * Gy + y) * Gz + z."""

from __future__ import annotations

from dataclasses import dataclass

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
