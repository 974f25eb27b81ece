"""Read-only access to a gtool store, refusing incomplete, unknown-layout or inconsistent stores."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import zarr

from gtool.errors import DamagedChunkError, StoreError
from gtool.geometry.tiles import tile_range, tile_size
from gtool.store import layout
from gtool.store.chunks import Selection, absent_chunks, missing_chunks_text, read_checked, stored_keys
from gtool.store.metadata import StoreMeta
from gtool.store.values import permutation_problem, permutations_digest, weight_problem


@dataclass(frozen=True)
class TileData:
    """One stored tile: tile-local (row, col) sorted by (row, col), and normalized values."""

    row: np.ndarray
    col: np.ndarray
    val: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.row.shape[0])


def tile_shape_problem(parts: list[np.ndarray], expected: int) -> str | None:
    """What is wrong with the shapes of a tile's row, col and val arrays (1-D, of the metadata's tile_nnz
    entries each), or None."""
    if all(p.shape == (expected,) for p in parts):
        return None
    if all(p.ndim == 1 for p in parts):
        return f"row/col/val lengths {[p.shape[0] for p in parts]}, metadata tile_nnz says {expected}"
    return f"row/col/val shapes {[p.shape for p in parts]}, expected ({expected},) each"


def tile_problem(tile: TileData, height: int, width: int) -> str | None:
    """What is wrong with a tile's entries (unsorted, duplicated or out-of-range, weights not finite and
    positive), or None."""
    if tile.nnz == 0:
        return None
    row_step = np.diff(tile.row)
    if np.any(row_step < 0):
        return "entries are not sorted by row"
    if np.any(np.diff(tile.col)[row_step == 0] <= 0):
        return "entries are not sorted by (row, col) or hold duplicates"
    if tile.row[0] < 0 or tile.row[-1] >= height:
        return f"row index outside [0, {height})"
    if tile.col.min() < 0 or tile.col.max() >= width:
        return f"column index outside [0, {width})"
    return weight_problem(tile.val)


def dtype_problem(array: zarr.Array) -> str | None:
    """What is wrong with a layout array's dtype: not of the kind the format gives it (an integer `val`
    would read as weights, float labels as class ids), or None. The width is free (zarr decodes by it)."""
    documented = layout.documented_dtype(array.path)
    if documented is None or array.dtype.kind == np.dtype(documented).kind:
        return None
    return f"array {array.path} has dtype {array.dtype}, expected {documented} (docs/store-format.md)"


class Store:
    """A complete gtool store opened for reading (a path or any fsspec URL zarr accepts)."""

    def __init__(self, location: str, storage_options: dict[str, Any] | None = None):
        self.location = str(location)
        try:
            self.group = zarr.open_group(store=self.location, mode="r", storage_options=storage_options)
        except (FileNotFoundError, zarr.errors.GroupNotFoundError, ValueError) as exc:
            raise StoreError(f"{self.location}: not a gtool store ({exc})") from None
        if self.group.metadata.zarr_format != 3:
            raise StoreError(
                f"{self.location}: a Zarr v{self.group.metadata.zarr_format} group, expected Zarr v3 (gtool "
                "writes and reads Zarr v3 stores only; re-run gtool shard)"
            )
        attributes = dict(self.group.attrs)
        meta = attributes.get(layout.META_KEY)
        if layout.PREDICTIONS_KEY in attributes and meta is None:
            raise StoreError(
                f"{self.location}: a gtool predict output (node arrays in original node order), not a graph "
                "store: read its arrays with zarr (docs/predict.md)"
            )
        if not isinstance(meta, dict):
            raise StoreError(f"{self.location}: not a gtool store (no '{layout.META_KEY}' attributes)")
        if meta.get("layout") != layout.LAYOUT_VERSION:
            raise StoreError(
                f"{self.location}: unknown store layout {meta.get('layout')!r} "
                f"(this gtool reads layout {layout.LAYOUT_VERSION})"
            )
        if meta.get("complete") is not True:
            raise StoreError(
                f"{self.location}: store is incomplete (its writer did not finish); re-run gtool shard"
            )
        self.meta = StoreMeta.from_dict(meta, self.location)
        self._check_arrays()
        if not self.meta.every_chunk:
            old_store_notice(self.location)

    @property
    def num_nodes(self) -> int:
        return self.meta.num_nodes

    @property
    def num_features(self) -> int:
        return self.meta.num_features

    @property
    def num_classes(self) -> int:
        return self.meta.num_classes

    @property
    def tiles(self) -> int:
        return self.meta.tiles

    @property
    def tile_size(self) -> int:
        return self.meta.tile_size

    @property
    def matrices(self) -> list[int]:
        """Stored matrices: [0] when pr == pc, else [0, 1]."""
        return self.meta.matrices

    @property
    def two_matrices(self) -> bool:
        return len(self.matrices) == 2

    def tile_nnz(self, matrix: int) -> np.ndarray:
        """T x T int64 array of nonzeros per tile, from the metadata (read-only)."""
        self.check_matrix(matrix)
        return self.meta.stats[matrix].tile_nnz

    def tile_bounds(self, i: int, j: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """Global row and column ranges of tile (i, j)."""
        self.check_tile(i, j)
        s, n = self.tile_size, self.num_nodes
        return tile_range(i, s, n), tile_range(j, s, n)

    def check_matrix(self, matrix: int) -> None:
        """Raise TypeError unless `matrix` is an int (True would name A1), ValueError unless the store
        holds it."""
        check_index("matrix", matrix)
        if matrix in self.matrices:
            return
        held = " and ".join(f"A{m}" for m in self.matrices)
        why = " (pr == pc: A0 serves every layer)" if not self.two_matrices else ""
        raise ValueError(f"{self.location}: no matrix {matrix!r}: the store holds {held}{why}")

    def check_tile(self, i: int, j: int) -> None:
        """Raise TypeError unless i and j are ints, ValueError unless (i, j) is a tile of the store's T x T
        grid."""
        check_index("tile index i", i)
        check_index("tile index j", j)
        t = self.tiles
        if not all(0 <= k < t for k in (i, j)):
            raise ValueError(
                f"{self.location}: no tile ({i!r}, {j!r}): tiles are (i, j) with 0 <= i, j < {t}"
            )

    def array(self, path: str) -> zarr.Array:
        """An array of the store by path, with an error naming the store when it is missing."""
        node = self.node(path)
        if node is None:
            raise StoreError(f"{self.location}: missing array {path}")
        if not isinstance(node, zarr.Array):
            raise StoreError(f"{self.location}: {path} is not an array")
        return node

    def node(self, path: str) -> zarr.Array | zarr.Group | None:
        """The array or group at `path`, None when there is none; a zarr.json zarr cannot read (an unknown
        codec, bad JSON) is a StoreError naming it."""
        try:
            return self.group[path]
        except KeyError:
            return None
        except Exception as exc:  # zarr raises its own errors, ValueError or TypeError for bad metadata
            raise StoreError(
                f"{self.location}: {path}/zarr.json cannot be read ({unreadable(exc)})"
            ) from None

    def read_tile(self, matrix: int, i: int, j: int) -> TileData:
        """Read tile (i, j) of a matrix, checking it against the metadata and its entries (sorted by
        (row, col), no duplicates, indices inside the tile); errors name the store, matrix and tile."""
        self.check_matrix(matrix)
        self.check_tile(i, j)
        where = f"{self.location}: matrix A{matrix} tile ({i}, {j})"
        paths = [layout.tile_array(matrix, i, j, f) for f in layout.TILE_FIELDS]
        nodes = [self.node(p) for p in paths]
        arrays = [a for a in nodes if isinstance(a, zarr.Array)]
        if len(arrays) < len(paths):
            missing = next(p for p, a in zip(paths, nodes, strict=True) if not isinstance(a, zarr.Array))
            raise StoreError(f"{where}: missing array {missing}")
        for array in arrays:
            if problem := dtype_problem(array):
                raise StoreError(f"{where}: {problem}")
        parts = [self.read(a, where=where) for a in arrays]
        if problem := tile_shape_problem(parts, int(self.tile_nnz(matrix)[i, j])):
            raise StoreError(f"{where}: {problem}")
        tile = TileData(*parts)
        (row0, row1), (col0, col1) = self.tile_bounds(i, j)
        problem = tile_problem(tile, row1 - row0, col1 - col0)
        if problem:
            raise StoreError(f"{where} (array {layout.tile_group(matrix, i, j)}): {problem}")
        return tile

    def iter_tiles(self, matrix: int = 0) -> Iterator[tuple[int, int, TileData]]:
        """(i, j, tile) for every tile of a matrix in row-major order, each read and checked when reached
        (the matrix is checked at the call)."""
        self.check_matrix(matrix)
        t = self.tiles
        return ((i, j, self.read_tile(matrix, i, j)) for i in range(t) for j in range(t))

    def perm(self, which: str) -> np.ndarray:
        """pr ('r') or pc ('c'): position -> original node id, checked to hold every node id once (a
        damaged permutation would put rows at another node's place or leave some unset)."""
        if which not in layout.PERMS:
            raise ValueError(f"perm() takes 'r' (pr, row order) or 'c' (pc, column order), got {which!r}")
        path = layout.PERMS[which]
        ids = self.read(self.array(path))
        if problem := permutation_problem(ids, self.num_nodes):
            raise StoreError(f"{self.location}: array {path}: {problem}; the store is damaged")
        return ids

    @functools.cached_property
    def node_order(self) -> dict[str, Any]:
        """StoreMeta.node_order, with the permutations' digest computed from perm/r and perm/c when the
        store's writer did not record it (stores written before it was)."""
        order = self.meta.node_order
        if "digest" not in order:
            order["digest"] = permutations_digest(self.perm("r"), self.perm("c"))
        return order

    def read(self, array: zarr.Array, selection: Selection = (), where: str | None = None) -> np.ndarray:
        """array[selection] through `read_checked`: damaged chunks, and missing ones where the store's
        writer stored every chunk, raise DamagedChunkError naming `where` (default: the store)."""
        return read_checked(array, selection, where or self.location, every_chunk=self.meta.every_chunk)

    def absent_chunks(
        self, arrays: dict[str, zarr.Array] | None = None
    ) -> dict[str, tuple[zarr.Array, list[tuple[int, ...]], int]]:
        """Arrays missing chunk files (of `arrays`, default all), by path: (array, the first missing chunks,
        how many are missing), from one listing of the store. Empty for stores written before every chunk
        was stored (StoreMeta.every_chunk), where a missing chunk cannot be told from a fill value."""
        if not self.meta.every_chunk:
            return {}
        keys = stored_keys(self.group)
        found = {}
        for path, array in sorted((arrays if arrays is not None else store_arrays(self)).items()):
            first, missing = absent_chunks(array, keys)
            if missing:
                found[path] = (array, first, missing)
        return found

    def check_every_chunk(self) -> None:
        """Raise DamagedChunkError naming the first array that misses chunk files (`absent_chunks`)."""
        absent = self.absent_chunks()
        if absent:
            array, first, missing = next(iter(absent.values()))
            more = f" ({len(absent) - 1} more arrays miss chunks)" if len(absent) > 1 else ""
            raise DamagedChunkError(f"{self.location}: {missing_chunks_text(array, first, missing)}{more}")

    def _check_arrays(self) -> None:
        n = self.num_nodes
        expected = {
            layout.PERM_ROWS: (n,),
            layout.PERM_COLS: (n,),
            layout.FEATURES: (n, self.num_features),
            layout.SPLIT["r"]: (n,),
            layout.SPLIT["c"]: (n,),
        }
        for path, shape in expected.items():
            got = self.array(path).shape
            if tuple(got) != shape:
                raise StoreError(
                    f"{self.location}: array {path} has shape {tuple(got)}, metadata implies {shape}"
                )
        for path in layout.NODE_DTYPES:
            if problem := dtype_problem(self.array(path)):
                raise StoreError(f"{self.location}: {problem}")
        kind, classes = self.meta.labels.kind, self.num_classes
        multi = self.meta.labels.multi_label
        expected_shape = (n, classes) if multi else (n,)
        for order in ("r", "c"):
            got = tuple(self.array(layout.LABELS[order]).shape)
            if got != expected_shape:
                columns = f", one column per class (num_classes {classes})" if multi else ""
                raise StoreError(
                    f"{self.location}: array {layout.LABELS[order]} has shape {got}, expected "
                    f"{expected_shape} (metadata labels.kind is {kind!r}{columns})"
                )
        if self.tile_size != tile_size(n, self.tiles):
            raise StoreError(
                f"{self.location}: metadata tile_size {self.tile_size} does not match ceil(N / T) = "
                f"{tile_size(n, self.tiles)} for N = {n}, T = {self.tiles}"
            )
        for m in (0, 1):
            stored = self.node(f"adj/{m}") is not None
            if stored != (m in self.matrices):
                said = "describes" if m in self.matrices else "does not describe"
                raise StoreError(
                    f"{self.location}: group adj/{m} is {'' if stored else 'not '}stored, but the metadata "
                    f"{said} A{m}"
                )
        t = self.tiles
        for m in self.matrices:
            if self.tile_nnz(m).shape != (t, t):
                raise StoreError(f"{self.location}: stats of A{m} do not describe a {t}x{t} tiling")
            if (counted := int(self.tile_nnz(m).sum())) != self.meta.nnz[m]:
                raise StoreError(
                    f"{self.location}: metadata nnz of A{m} is {self.meta.nnz[m]}, its stats' tile_nnz "
                    f"add up to {counted}"
                )


def check_index(what: str, value: object) -> None:
    """Raise TypeError unless `value` is an integer (numpy's too) and not a bool, which Python counts as
    one (True would be 1, and a path such as adj/True/0_0 names no array)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"the {what} must be an int, got {value!r} ({type(value).__name__})")


def store_arrays(store: Store) -> dict[str, zarr.Array]:
    """Every array of the store by path (a zarr.json zarr cannot read is a StoreError)."""
    try:
        members = list(store.group.members(max_depth=None))
    except Exception as exc:  # as in Store.node
        raise StoreError(
            f"{store.location}: an array's zarr.json cannot be read ({unreadable(exc)})"
        ) from None
    return {path: node for path, node in members if isinstance(node, zarr.Array)}


def unreadable(exc: Exception) -> str:
    """Why zarr could not read some metadata, in words."""
    return f"{type(exc).__name__}: {exc}"


@functools.cache
def old_store_notice(location: str) -> None:
    """Say once per store and process that its missing chunks cannot be told from fill values."""
    logging.getLogger("gtool").warning(
        "notice: %s was written before gtool stored every chunk: a missing chunk file reads as zeros "
        "instead of failing (re-shard it to have missing chunks detected)",
        location,
    )


StoreLike = Union["Store", str, os.PathLike]
"""A Store, or the path or URL of one."""


def open_store(location: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> Store:
    """Open a complete store for reading (a path, os.PathLike or fsspec URL; `~` in a path is the home
    folder, as in a shell)."""
    if not isinstance(location, (str, os.PathLike)):
        kind = "an open Store" if isinstance(location, Store) else type(location).__name__
        raise TypeError(f"open_store() takes a path or URL (str or os.PathLike), got {kind}")
    path = os.fspath(location)
    return Store(path if "://" in path else os.path.expanduser(path), storage_options)


def as_store(store: StoreLike, storage_options: dict[str, Any] | None = None) -> Store:
    """`store` itself when it is a Store, else the store at that path or URL, opened."""
    return store if isinstance(store, Store) else open_store(store, storage_options)
