"""`gtool verify`: read every chunk of a store once, checking checksums and the store's invariants.

Memory stays at a few tiles, one block of node rows and O(N) bits for the permutation check, however
large the store: tiles are read in pairs (tile (i, j) of A0 with tile (j, i) of A1, its transpose when
the graph is symmetrized), node arrays in blocks of whole chunks. The store's keys are listed first, so an
array missing chunk files is one problem and is not read (metadata claiming rows never stored costs a
listing, not a read per claimed chunk); the permutation check is skipped, with a problem, when its marks
would exceed the memory budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest

import numpy as np
import zarr

from gtool.errors import DamagedChunkError
from gtool.memory import machine_memory
from gtool.store import layout
from gtool.store.chunks import (
    Selection,
    block_rows,
    has_checksums,
    missing_chunks_text,
    read_checked,
    stored_chunk_rows,
    stored_keys,
)
from gtool.store.reader import (
    Store,
    StoreLike,
    TileData,
    as_store,
    dtype_problem,
    store_arrays,
    tile_problem,
    tile_shape_problem,
)
from gtool.store.values import (
    DIGESTS,
    IdsHash,
    combined_digest,
    first_non_finite_row,
    label_problem,
    node_value_digest,
    split_problem,
)

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
    flagged: set[str] = field(default_factory=set)
    """Arrays (paths) and checks (A0, A1, perm, nodes) some problem was found in."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def clean(self, *names: str) -> bool:
        """Whether no problem was found in any of these arrays or checks (by path prefix)."""
        return not any(f.startswith(names) for f in self.flagged)


def total_chunks(arrays: dict[str, zarr.Array]) -> int:
    """Chunks a full verification reads (the total of its progress bar)."""
    return sum(a.nchunks for a in arrays.values() if a.size)


def default_memory_budget() -> int:
    """Bytes the O(N) checks may hold: half of the memory available now (under any cgroup limit)."""
    return machine_memory().available // 2


def verify_store(
    store: StoreLike,
    arrays: dict[str, zarr.Array] | None = None,
    progress: Progress | None = None,
    memory_budget: int | None = None,
) -> VerifyReport:
    """Check every chunk and invariant of a store (a Store, or its path or URL, which must open: an
    incomplete or inconsistent store raises StoreError); problems are collected, never raised."""
    store = as_store(store)
    arrays = arrays if arrays is not None else store_arrays(store)
    budget = memory_budget if memory_budget is not None else default_memory_budget()
    return Verifier(store, arrays, progress, budget).run()


class Verifier:
    """One verification run: reads each array through `read`, which records damage as a problem."""

    def __init__(
        self, store: Store, arrays: dict[str, zarr.Array], progress: Progress | None, memory_budget: int
    ):
        self.store, self.arrays, self.progress = store, arrays, progress
        self.memory_budget = memory_budget
        self.report = VerifyReport(store.location)
        self.done: set[str] = set()
        self.incomplete: set[str] = set()
        self.keys = None if store.meta.every_chunk else stored_keys(store.group)
        """A store written before every chunk was stored: its keys, to step over chunks never written."""

    def run(self) -> VerifyReport:
        if self.store.meta.every_chunk:
            self.check_chunks_present()
        self.check_tiles()
        self.check_permutations()
        self.check_node_arrays()
        for path in sorted(set(self.arrays) - self.done):  # arrays beyond the layout: checksums only
            for _ in self.blocks(path):
                pass
        return self.report

    def problem(self, message: str, *where: str) -> None:
        """Record a problem found in the arrays or checks `where`."""
        self.report.problems.append(message)
        self.report.flagged.update(where)

    def check_chunks_present(self) -> None:
        """Every chunk file of every array exists (the writer stored every chunk); an array missing some is
        one problem and is not read."""
        for path, (array, first, missing) in self.store.absent_chunks(self.arrays).items():
            self.problem(missing_chunks_text(array, first, missing), path, "chunks")
            self.incomplete.add(path)
            self.done.add(path)
            self.report.arrays += 1

    def array(self, path: str) -> zarr.Array | None:
        """An array of the store, or None (a problem) when missing or missing chunks."""
        if path not in self.arrays:
            self.problem(f"array {path}: missing", path)
            return None
        return None if path in self.incomplete else self.arrays[path]

    def read(self, path: str, selection: Selection = ()) -> np.ndarray | None:
        """array[selection], or None when a chunk is damaged (recorded with the chunks it names)."""
        array = self.array(path)
        if array is None:
            return None
        self.count(path, array)
        if problem := dtype_problem(array):
            self.problem(problem, path)
            return None
        try:  # chunks present: checked by check_chunks_present (stores that store every chunk)
            return read_checked(array, selection, every_chunk=False)
        except DamagedChunkError as exc:
            self.problem(str(exc), path)
            return None
        finally:
            chunks = chunks_in(array, selection)
            self.report.chunks += chunks
            if self.progress is not None:
                self.progress(chunks)

    def count(self, path: str, array: zarr.Array) -> None:
        """Count the array as checked, once."""
        if path not in self.done:
            self.done.add(path)
            self.report.arrays += 1
            self.report.unchecksummed_arrays += not has_checksums(array)

    def blocks(
        self, path: str, step: int | None = None, written_only: bool = True
    ) -> Iterator[tuple[slice, np.ndarray | None]]:
        """(rows, data) of an array in blocks of `step` rows (default: whole chunks of rows of about
        BLOCK_BYTES); data None where damaged. In a store written before every chunk was stored, with
        `written_only`, a run of chunk rows never written is one block of one row of the fill value (what
        they read as), so that metadata claiming more rows than were written costs no read per chunk."""
        array = self.array(path)
        if array is None:
            return
        if array.ndim == 0 or array.shape[0] == 0:
            self.read(path)
            return
        written = stored_chunk_rows(array, self.keys) if self.keys is not None and written_only else None
        for rows, stored in row_spans(array, written, step or block_rows(array)):
            yield (rows, self.read(path, (rows,))) if stored else self.unwritten(path, array, rows)

    def unwritten(self, path: str, array: zarr.Array, rows: slice) -> tuple[slice, np.ndarray]:
        """`rows` of chunks never written, as one row of the fill value, counted as checked."""
        self.count(path, array)
        chunks = chunks_in(array, (rows,))
        self.report.chunks += chunks
        if self.progress is not None:
            self.progress(chunks)
        return rows, np.full((1, *array.shape[1:]), array.fill_value, dtype=array.dtype)

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

    def tile(self, m: int, i: int, j: int) -> TileData | None:
        """Tile (i, j) of matrix m read and checked field by field, or None when it failed a check."""
        where = f"A{m} tile ({i}, {j})"
        row, col, val = (self.read(layout.tile_array(m, i, j, f)) for f in layout.TILE_FIELDS)
        self.report.tiles[m] += 1
        if row is None or col is None or val is None:
            return None
        self.report.nonzeros[m] += row.shape[0] if row.ndim else 0
        if problem := tile_shape_problem([row, col, val], int(self.store.tile_nnz(m)[i, j])):
            self.problem(f"{where}: {problem}", f"A{m}")
            return None
        tile = TileData(row, col, val)
        (r0, r1), (c0, c1) = self.store.tile_bounds(i, j)
        problem = tile_problem(tile, r1 - r0, c1 - c0)
        if problem:
            self.problem(f"{where} (array {layout.tile_group(m, i, j)}): {problem}", f"A{m}")
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
                "metadata says the graph is symmetrized",
                "symmetry",
            )
        elif not np.allclose(other.val, tile.val[order], rtol=VALUE_RTOL, atol=0):
            self.problem(
                f"A{m} tile ({j}, {i}) (array {layout.tile_group(m, j, i)}) is not A0 tile ({i}, {j}) "
                "transposed: weights differ, but the metadata says the graph is symmetrized",
                "symmetry",
            )

    # node arrays

    def check_permutations(self) -> None:
        """perm/r and perm/c hold each node id once; equal (identity) for the single (none) scheme; their
        digest is the metadata's (where recorded)."""
        n = self.store.num_nodes
        scheme = self.store.meta.permutation.scheme
        paths = (layout.PERM_ROWS, layout.PERM_COLS)
        if self.incomplete & set(paths):
            return  # an array missing chunks is one problem already
        if 2 * n > self.memory_budget:
            self.problem(
                f"arrays perm/r and perm/c: not checked: {n:,} node ids need {2 * n:,} bytes of marks, "
                f"beyond the memory budget of {self.memory_budget:,} bytes (metadata num_nodes too large?)",
                "perm",
            )
            return
        seen = {path: np.zeros(n, dtype=bool) for path in (layout.PERM_ROWS, layout.PERM_COLS)}
        hashed = {path: IdsHash() for path in paths}
        differ, readable = False, True
        step = block_rows(self.store.array(layout.PERM_ROWS))
        blocks = (self.blocks(path, step, written_only=False) for path in paths)
        pairs = zip(*blocks, strict=True)
        for (rows, pr), (_, pc) in pairs:
            for path, block in ((layout.PERM_ROWS, pr), (layout.PERM_COLS, pc)):
                if block is not None:
                    self.mark_ids(path, block, seen[path])
                    hashed[path].update(block)
            if pr is None or pc is None:
                readable = False
                continue
            differ = differ or not np.array_equal(pr, pc)
            if scheme == "none" and not np.array_equal(pr, np.arange(rows.start, rows.stop)):
                self.problem(
                    f"array {layout.PERM_ROWS}: not the identity, but the permutation scheme is none", "perm"
                )
        for path, marks in seen.items():
            missing = n - int(np.count_nonzero(marks))
            if missing and readable:
                self.problem(
                    f"array {path}: not a permutation ({missing} of {n} node ids never appear)", "perm"
                )
        recorded = self.store.meta.permutation.digest
        digest = combined_digest(*(hashed[path].digest() for path in paths))
        if readable and recorded is not None and digest != recorded:
            self.problem(
                f"arrays perm/r and perm/c: their digest is {digest}, but the metadata's permutation.digest "
                f"is {recorded} (the store's node order)",
                "perm",
            )
        if scheme in ("single", "none") and differ:
            self.problem(f"arrays perm/r and perm/c differ, but the permutation scheme is {scheme}", "perm")
        if readable and differ != self.store.two_matrices:
            stored = "both A0 and A1" if self.store.two_matrices else "only A0"
            equal = f"{'un' * (not differ)}equal"
            self.problem(f"the store holds {stored}, but perm/r and perm/c are {equal}", "perm")

    def mark_ids(self, path: str, ids: np.ndarray, seen: np.ndarray) -> None:
        n = seen.shape[0]
        inside = (ids >= 0) & (ids < n)
        if not inside.all():  # marked without them, so that the ids never appearing are counted right
            self.problem(f"array {path}: node ids outside [0, {n})", "perm")
            ids = ids[inside]
        repeated = np.count_nonzero(seen[ids]) + ids.size - np.unique(ids).size
        if repeated:
            self.problem(f"array {path}: not a permutation (node ids repeated)", "perm")
        seen[ids] = True

    def check_node_arrays(self) -> None:
        classes = self.store.num_classes
        for rows, block in self.blocks(layout.FEATURES):
            self.report.node_rows += rows.stop - rows.start
            bad = None if block is None else first_non_finite_row(block)
            if bad is not None:
                self.problem(
                    f"array {layout.FEATURES}: non-finite values (first in row {rows.start + bad})",
                    layout.FEATURES,
                )
        step = block_rows(self.store.array(layout.PERM_ROWS))
        arrays = {"labels": layout.LABELS, "split": layout.SPLIT}
        checks = {"labels": lambda labels: label_problem(labels, classes), "split": split_problem}
        digests: dict[str, list[int | None]] = {name: [] for name in arrays}
        for order in ("r", "c"):
            perm = self.order_ids(order)
            digest: dict[str, int | None] = {name: None if perm is None else 0 for name in arrays}
            blocks = (self.blocks(paths[order], step) for paths in arrays.values())
            for parts in zip_longest(*blocks, fillvalue=(None, None)):
                ids = None
                for name, (rows, values) in zip(arrays, parts, strict=True):
                    problem = None if values is None else checks[name](values)
                    if problem:
                        path = arrays[name][order]
                        self.problem(f"array {path}: {problem} in rows {rows.start}-{rows.stop - 1}", path)
                    sum_so_far = digest[name]
                    if values is None or problem or perm is None or sum_so_far is None:
                        digest[name] = None
                        continue
                    ids = read_checked(perm, (rows,), every_chunk=False) if ids is None else ids
                    digest[name] = (sum_so_far + node_value_digest(ids, values)) % DIGESTS
            for name in arrays:
                digests[name].append(digest[name])
        for name, (by_rows, by_cols) in digests.items():
            if by_rows is not None and by_cols is not None and by_rows != by_cols:
                self.problem(
                    f"arrays {arrays[name]['r']} and {arrays[name]['c']} disagree: some node's {name} value "
                    "differs between the two orders (a chunk of another array or store, its checksum valid?)",
                    *arrays[name].values(),
                )

    def order_ids(self, order: str) -> zarr.Array | None:
        """perm/r or perm/c, for the digests that compare the two orders of labels and splits: when the
        permutations checked clean and the store stores every chunk (older stores step over unwritten
        chunks, so their label and permutation blocks do not align)."""
        path = layout.PERMS[order]
        if not self.store.meta.every_chunk or not self.report.clean("perm") or path in self.incomplete:
            return None
        return self.arrays.get(path)


def row_spans(array: zarr.Array, written: np.ndarray | None, step: int) -> Iterator[tuple[slice, bool]]:
    """The array's rows in blocks of at most `step` rows, as (rows, written). With `written` (sorted indices
    of the chunk rows that hold chunk files) a run of chunk rows never written is one span, written False,
    and no block reaches from written chunk rows into unwritten ones."""
    rows_per_chunk, start, end = array.chunks[0], 0, array.shape[0]
    if written is None:
        yield from ((slice(first, min(first + step, end)), True) for first in range(0, end, step))
        return
    last_of_run = np.append(np.flatnonzero(np.diff(written) != 1), written.size - 1)
    while start < end:
        following = int(np.searchsorted(written, start // rows_per_chunk))
        next_written = int(written[following]) * rows_per_chunk if following < written.size else end
        if next_written > start:
            stop, stored = min(end, next_written), False
        else:
            run_end = int(written[last_of_run[np.searchsorted(last_of_run, following)]]) + 1
            stop, stored = min(start + step, end, run_end * rows_per_chunk), True
        yield slice(start, stop), stored
        start = stop


def chunks_in(array: zarr.Array, selection: Selection) -> int:
    """Stored chunks a read of `selection` touches (0 for an empty array)."""
    if array.size == 0:
        return 0
    if not selection:
        return int(array.nchunks)
    rows = selection[0]
    per_row = int(array.nchunks) // -(-array.shape[0] // array.chunks[0])
    return (-(-rows.stop // array.chunks[0]) - rows.start // array.chunks[0]) * per_row
