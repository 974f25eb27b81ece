"""One streaming pass over a store's tiles, shared by everything `gtool stats` counts.

Each tile is read once and handed to every visitor that asks for its matrix, so memory stays at one
tile plus what the visitors keep (O(T^2 + N)) however large the store is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from gtool.store.reader import Store, TileData

Progress = Callable[[int], None]
"""Called with the nonzeros of each tile once it has been visited."""


class TileVisitor(Protocol):
    """Something that accumulates over the tiles of some stored matrices."""

    @property
    def matrices(self) -> Sequence[int]:
        """The stored matrices whose tiles it visits."""

    def visit(self, matrix: int, i: int, j: int, tile: TileData) -> None: ...


def scan_nnz(store: Store, visitors: Iterable[TileVisitor]) -> int:
    """Nonzeros a scan with these visitors reads (the total of a progress bar)."""
    return sum(int(store.tile_nnz(m).sum()) for m in scanned_matrices(store, visitors))


def scanned_matrices(store: Store, visitors: Iterable[TileVisitor]) -> list[int]:
    """Stored matrices some visitor asks for."""
    wanted = {m for v in visitors for m in v.matrices}
    return [m for m in store.matrices if m in wanted]


def scan_tiles(store: Store, visitors: Sequence[TileVisitor], progress: Progress | None = None) -> None:
    """Read every tile of the matrices the visitors ask for once, in (matrix, i, j) order."""
    t = store.tiles
    for m in scanned_matrices(store, visitors):
        takers = [v for v in visitors if m in v.matrices]
        for i in range(t):
            for j in range(t):
                tile = store.read_tile(m, i, j)
                for visitor in takers:
                    visitor.visit(m, i, j, tile)
                if progress is not None:
                    progress(tile.nnz)
