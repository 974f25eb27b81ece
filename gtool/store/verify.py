"""`gtool verify`: read every chunk of a store once, checking checksums and the store's invariants.

Memory stays at a few tiles, one block of node rows and O(N) bits for the permutation check, however
large the store: tiles are read one pair at a time (tile (i, j) of A0 with tile (j, i) of A1, which must
be its transpose when the graph is symmetrized), node arrays in blocks of whole chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import zarr

from gtool.errors import DamagedChunkError
from gtool.store import layout
from gtool.store.chunks import Selection, block_rows, has_checksums, read_checked
from gtool.store.reader import Store, TileData, tile_problem

Progress = Callable[[int], None]
"""Called with the number of chunks just read."""

VALUE_RTOL = 1e-6
"""Relative tolerance of the A1 = A0^T value comparison (the products are equal in exact arithmetic)."""


@dataclass
class VerifyReport:
    """What `verify_store` checked and every problem it found."""

    location: str
    problems: list[str] = field(default_factory=list)
    arrays: int = 0
    chunks: int = 0
    unchecksummed_arrays: int = 0
    tiles: dict[int, int] = field(default_factory=dict)
    nonzeros: dict[int, int] = field(default_factory=dict)
    transposed_pairs: int = 0
    node_rows: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def store_arrays(store: Store) -> dict[str, zarr.Array]:
    """Every array of the store by path."""
    return {path: node for path, node in store.group.members(max_depth=None) if isinstance(node, zarr.Array)}


def total_chunks(arrays: dict[str, zarr.Array]) -> int:
    """Chunks a full verification reads (the total of its progress bar)."""
    return sum(a.nchunks for a in arrays.values() if a.size)


def verify_store(
    store: Store, arrays: dict[str, zarr.Array] | None = None, progress: Progress | None = None
) -> VerifyReport:
    """Check every chunk and invariant of an opened store; problems are collected, never raised."""
    return Verifier(store, arrays if arrays is not None else store_arrays(store), progress).run()


class Verifier:
    """One verification run: reads each array through `read`, which records damage as a problem."""

    def __init__(self, store: Store, arrays: dict[str, zarr.Array], progress: Progress | None):
        self.store, self.arrays, self.progress = store, arrays, progress
        self.report = VerifyReport(store.location)
        self.done: set[str] = set()

    def run(self) -> VerifyReport:
        self.check_tiles()
        self.check_permutations()
        self.check_node_arrays()
        for path in sorted(set(self.arrays) - self.done):  # arrays beyond the layout: checksums only
            for _ in self.blocks(path):
                pass
        return self.report

    def problem(self, message: str) -> None:
        self.report.problems.append(message)

    def array(self, path: str) -> zarr.Array | None:
        """An array of the store, or None (a problem) when missing."""
        if path not in self.arrays:
            self.problem(f"array {path}: missing")
            return None
        return self.arrays[path]

    def read(self, path: str, selection: Selection = ()) -> np.ndarray | None:
        """array[selection], or None when a chunk is damaged (recorded with the chunks it names)."""
        array = self.array(path)
        if array is None:
            return None
        if path not in self.done:
            self.done.add(path)
            self.report.arrays += 1
            self.report.unchecksummed_arrays += not has_checksums(array)
        try:
            return read_checked(array, selection)
        except DamagedChunkError as exc:
            self.problem(str(exc))
            return None
        finally:
            chunks = chunks_in(array, selection)
            self.report.chunks += chunks
            if self.progress is not None:
                self.progress(chunks)

    def blocks(self, path: str, step: int | None = None) -> Iterator[tuple[slice, np.ndarray | None]]:
        """(rows, data) of an array in blocks of `step` rows (default: whole chunks of rows of about
        BLOCK_BYTES); data None where damaged."""
        array = self.array(path)
        if array is None:
            return
        if array.ndim == 0 or array.shape[0] == 0:
            self.read(path)
            return
        step = step or block_rows(array)
        for start in range(0, array.shape[0], step):
            rows = slice(start, min(start + step, array.shape[0]))
            yield rows, self.read(path, (rows,))

    # adjacency

    def check_tiles(self) -> None:
        store, t = self.store, self.store.tiles
        symmetric = store.meta.symmetrized
        for m in store.matrices:
            self.report.tiles[m] = 0
            self.report.nonzeros[m] = 0
        for i in range(t):
            for j in range(t):
                if store.two_matrices:
                    first, partner = self.tile(0, i, j), self.tile(1, j, i)
                elif symmetric and j >= i:
                    first = self.tile(0, i, j)
                    partner = first if i == j else self.tile(0, j, i)
                elif not symmetric:
                    first, partner = self.tile(0, i, j), None
                else:
                    continue  # (i, j) below the diagonal was read with (j, i)
                if symmetric and first is not None and partner is not None:
                    self.compare_transposed(first, partner, (i, j), 1 if store.two_matrices else 0)
        for m in store.matrices:
            self.check_total(m)

    def tile(self, m: int, i: int, j: int) -> TileData | None:
        """Tile (i, j) of matrix m read and checked field by field, or None when it failed a check."""
        where = f"A{m} tile ({i}, {j})"
        row, col, val = (self.read(layout.tile_array(m, i, j, f)) for f in layout.TILE_FIELDS)
        self.report.tiles[m] += 1
        if row is None or col is None or val is None:
            return None
        expected = int(self.store.tile_nnz(m)[i, j])
        lengths = [p.shape[0] for p in (row, col, val)]
        self.report.nonzeros[m] += lengths[0]
        if lengths != [expected] * 3:
            self.problem(f"{where}: row/col/val lengths {lengths}, metadata tile_nnz says {expected}")
            return None
        tile = TileData(row, col, val)
        (r0, r1), (c0, c1) = self.store.tile_bounds(i, j)
        problem = tile_problem(tile, r1 - r0, c1 - c0)
        if problem is None and not np.all(np.isfinite(tile.val) & (tile.val > 0)):
            problem = "weights that are not finite and positive"
        if problem:
            self.problem(f"{where} (array {layout.tile_group(m, i, j)}): {problem}")
            return None
        return tile

    def compare_transposed(self, tile: TileData, other: TileData, ij: tuple[int, int], m: int) -> None:
        """Tile (j, i) of A_m must be tile (i, j) of A0 transposed (the graph is symmetrized)."""
        i, j = ij
        self.report.transposed_pairs += 1
        order = np.lexsort((tile.row, tile.col))
        same = (
            other.nnz == tile.nnz
            and np.array_equal(other.row, tile.col[order])
            and np.array_equal(other.col, tile.row[order])
        )
        if not same:
            self.problem(
                f"A{m} tile ({j}, {i}) (array {layout.tile_group(m, j, i)}) is not A0 tile ({i}, {j}) "
                f"transposed: different nonzero positions ({other.nnz} vs {tile.nnz} entries), but the "
                "metadata says the graph is symmetrized"
            )
        elif not np.allclose(other.val, tile.val[order], rtol=VALUE_RTOL, atol=0):
            self.problem(
                f"A{m} tile ({j}, {i}) (array {layout.tile_group(m, j, i)}) is not A0 tile ({i}, {j}) "
                "transposed: weights differ, but the metadata says the graph is symmetrized"
            )

    def check_total(self, m: int) -> None:
        stated = self.store.meta.nnz[m]
        counted = int(self.store.tile_nnz(m).sum())
        if stated != counted:
            self.problem(f"metadata nnz of A{m} is {stated}, its tile_nnz add up to {counted}")

    # node arrays

    def check_permutations(self) -> None:
        """perm/r and perm/c hold each node id once; equal (identity) for the single (none) scheme."""
        n = self.store.num_nodes
        scheme = self.store.meta.permutation.scheme
        seen = {path: np.zeros(n, dtype=bool) for path in (layout.PERM_ROWS, layout.PERM_COLS)}
        differ, readable = False, True
        step = block_rows(self.store.array(layout.PERM_ROWS))
        pairs = zip(self.blocks(layout.PERM_ROWS, step), self.blocks(layout.PERM_COLS, step), strict=True)
        for (rows, pr), (_, pc) in pairs:
            for path, block in ((layout.PERM_ROWS, pr), (layout.PERM_COLS, pc)):
                if block is not None:
                    self.mark_ids(path, block, seen[path])
            if pr is None or pc is None:
                readable = False
                continue
            differ = differ or not np.array_equal(pr, pc)
            if scheme == "none" and not np.array_equal(pr, np.arange(rows.start, rows.stop)):
                self.problem(
                    f"array {layout.PERM_ROWS}: not the identity, but the permutation scheme is none"
                )
        for path, marks in seen.items():
            missing = n - int(np.count_nonzero(marks))
            if missing and readable:
                self.problem(f"array {path}: not a permutation ({missing} of {n} node ids never appear)")
        if scheme in ("single", "none") and differ:
            self.problem(f"arrays perm/r and perm/c differ, but the permutation scheme is {scheme}")
        if readable and differ != self.store.two_matrices:
            stored = "both A0 and A1" if self.store.two_matrices else "only A0"
            self.problem(f"the store holds {stored}, but perm/r and perm/c are {'un' * (not differ)}equal")

    def mark_ids(self, path: str, ids: np.ndarray, seen: np.ndarray) -> None:
        n = seen.shape[0]
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            self.problem(f"array {path}: node ids outside [0, {n})")
            return
        repeated = np.count_nonzero(seen[ids]) + ids.size - np.unique(ids).size
        if repeated:
            self.problem(f"array {path}: not a permutation (node ids repeated)")
        seen[ids] = True

    def check_node_arrays(self) -> None:
        classes = self.store.num_classes
        for rows, block in self.blocks(layout.FEATURES):
            self.report.node_rows += rows.stop - rows.start
            if block is not None and not np.all(np.isfinite(block)):
                bad = rows.start + int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
                self.problem(f"array {layout.FEATURES}: non-finite values (first in row {bad})")
        for order in ("r", "c"):
            for rows, labels in self.blocks(layout.LABELS[order]):
                low, high = (-1, classes - 1) if labels is None or labels.ndim == 1 else (-1, 1)
                if labels is not None and labels.size and (labels.min() < low or labels.max() > high):
                    self.problem(
                        f"array {layout.LABELS[order]}: values outside [{low}, {high}] in rows "
                        f"{rows.start}-{rows.stop - 1}"
                    )
            codes = np.array([layout.SPLIT_NONE, *layout.SPLIT_CODES.values()])
            for rows, split in self.blocks(layout.SPLIT[order]):
                if split is not None and not np.all(np.isin(split, codes)):
                    self.problem(
                        f"array {layout.SPLIT[order]}: codes other than {codes.tolist()} in rows "
                        f"{rows.start}-{rows.stop - 1}"
                    )


def chunks_in(array: zarr.Array, selection: Selection) -> int:
    """Stored chunks a read of `selection` touches (0 for an empty array)."""
    if array.size == 0:
        return 0
    if not selection:
        return int(array.nchunks)
    rows = selection[0]
    per_row = int(array.nchunks) // -(-array.shape[0] // array.chunks[0])
    return (-(-rows.stop // array.chunks[0]) - rows.start // array.chunks[0]) * per_row
