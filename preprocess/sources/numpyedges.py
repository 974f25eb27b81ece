"""Edge arrays: .npy (2 x M or M x 2) and .npz (edge_index or its only array, or src and dst; optional
scalar num_nodes).

Arrays are memory-mapped and chunks are slices; deflated .npz members are extracted once into workdir
by `prepare`. Float arrays are accepted when every id is a whole number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, as_node_ids, check_kind, prepare_arrays
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk
from gtool.preprocess.sources.fileinfo import FileSource, describe_file
from gtool.preprocess.sources.npzmember import NpzMember, npz_keys

ID_KINDS = "iuf"
NPZ_LAYOUTS = (
    "one 2 x M or M x 2 array (named 'edge_index', or the only one beside 'num_nodes'), arrays 'src' and "
    "'dst', a scipy.sparse save_npz matrix ('format', 'shape', "
    "'indptr' and 'indices' or 'row' and 'col') or a GNN-benchmark graph ('adj_indptr', 'adj_indices', "
    "'adj_shape')"
)


@dataclass(frozen=True)
class EdgeColumn:
    """The sources or destinations of an edge list: a 1-D array, or row/column `side` of a 2-D one."""

    ref: ArrayRef
    side: int | None = None
    edges_first: bool = False

    def take(self, start: int, stop: int) -> np.ndarray:
        """Ids of edges [start, stop), memory-mapped."""
        arr = self.ref.open()
        if self.side is None:
            return arr[start:stop]
        return arr[start:stop, self.side] if self.edges_first else arr[self.side, start:stop]

    def element(self, i: int) -> str:
        """Index of this column's id of edge i, e.g. 'edge_index[0, 17]'."""
        if self.side is None:
            return f"{self.ref.name}[{i}]"
        return (
            f"{self.ref.name}[{i}, {self.side}]" if self.edges_first else f"{self.ref.name}[{self.side}, {i}]"
        )

    def edge(self, i: int) -> str:
        """Index of the whole edge i in this column's array, e.g. 'edge_index[:, 17]'."""
        if self.side is None:
            return self.element(i)
        return f"{self.ref.name}[{i}, :]" if self.edges_first else f"{self.ref.name}[:, {i}]"

    def ids(self, start: int, stop: int) -> np.ndarray:
        """Ids of edges [start, stop) as int64, failing on non-integer values with their index."""
        return as_node_ids(self.take(start, stop), self.ref.file, lambda k: self.element(start + k))


@dataclass(frozen=True)
class ArrayLocator:
    """Maps edge k of an array chunk's block to its array index."""

    src: EdgeColumn
    dst: EdgeColumn
    start: int

    def __call__(self, k: int) -> tuple[int | None, str | None]:
        i = self.start + k
        if self.src.ref == self.dst.ref:
            return None, self.src.edge(i)
        return None, f"{self.src.element(i)} / {self.dst.element(i)}"


@dataclass(frozen=True)
class ArrayEdgeChunk(EdgeChunk):
    """Edges [start, stop) of memory-mapped edge arrays."""

    src: EdgeColumn
    dst: EdgeColumn
    start: int
    stop: int

    def read(self) -> EdgeBlock:
        src = self.src.ids(self.start, self.stop)
        dst = self.dst.ids(self.start, self.stop)
        return EdgeBlock(src, dst, self.src.ref.file, locate=ArrayLocator(self.src, self.dst, self.start))


class ArrayEdgeSource(FileSource):
    """Edges held in arrays of a .npy or .npz file."""

    def __init__(
        self, path: str, fmt: str, src: EdgeColumn, dst: EdgeColumn, edges: int, num_nodes: int | None
    ):
        super().__init__(path, num_nodes)
        self.fmt = fmt
        self.src, self.dst, self.edges = src, dst, edges

    def edge_count(self) -> int:
        return self.edges

    def prepare(self, workdir: str) -> None:
        src, dst = prepare_arrays([self.src.ref, self.dst.ref], workdir)
        self.src, self.dst = replace(self.src, ref=src), replace(self.dst, ref=dst)

    def edge_chunks(self, edges_per_chunk: int) -> list[ArrayEdgeChunk]:
        if self.src.ref.needs_extraction or self.dst.ref.needs_extraction:
            raise RuntimeError(f"{self.path} has compressed edge arrays: call prepare(workdir) first")
        step = max(1, edges_per_chunk)
        return [
            ArrayEdgeChunk(self.src, self.dst, start, min(start + step, self.edges))
            for start in range(0, max(1, self.edges), step)
        ]

    def describe(self) -> dict[str, Any]:
        arrays = sorted({self.src.ref.name, self.dst.ref.name})
        return describe_file(self.path, self.fmt, arrays=arrays, edges=self.edges)


def edge_index_columns(ref: ArrayRef) -> tuple[EdgeColumn, EdgeColumn, int]:
    """Source and destination columns of a 2 x M (or M x 2) edge array, and M; 2 x 2 reads as 2 x M."""
    shape, dtype = ref.header()
    check_kind(dtype, ref.where, "integer node ids", ID_KINDS)
    if len(shape) == 2 and shape[0] == 2:
        return EdgeColumn(ref, 0), EdgeColumn(ref, 1), shape[1]
    if len(shape) == 2 and shape[1] == 2:
        return EdgeColumn(ref, 0, True), EdgeColumn(ref, 1, True), shape[0]
    raise InputError(ref.where, f"expected a 2 x M or M x 2 edge array, got shape {shape}")


def src_dst_columns(path: str, keys: tuple[str, str] = ("src", "dst")) -> tuple[EdgeColumn, EdgeColumn, int]:
    """Columns of the 1-D source and destination arrays `keys` of an .npz, and their common length."""
    lengths = []
    for key in keys:
        ref = ArrayRef(path, key)
        shape, dtype = ref.header()
        check_kind(dtype, ref.where, "integer node ids", ID_KINDS)
        if len(shape) != 1:
            raise InputError(ref.where, f"expected a 1-D array of node ids, got shape {shape}")
        lengths.append(shape[0])
    if lengths[0] != lengths[1]:
        raise InputError(
            path,
            f"'{keys[0]}' has {lengths[0]} ids but '{keys[1]}' has {lengths[1]}; expected equal lengths",
        )
    return EdgeColumn(ArrayRef(path, keys[0])), EdgeColumn(ArrayRef(path, keys[1])), lengths[0]


def npz_num_nodes(path: str) -> int:
    """The scalar 'num_nodes' of an .npz."""
    member = NpzMember(path, "num_nodes")
    if member.size != 1 or member.dtype.kind not in "iu":
        raise InputError(
            member.where, f"expected an integer scalar, got {member.dtype} of shape {member.shape}"
        )
    value = int(next(member.iter_flat(1))[0])
    if value < 0:
        raise InputError(member.where, f"expected a node count >= 0, got {value}")
    return value


def open_npy_edges(path: str, num_nodes: int | None = None) -> ArrayEdgeSource:
    """Edges of a .npy holding a 2 x M or M x 2 integer array."""
    src, dst, edges = edge_index_columns(ArrayRef(path))
    return ArrayEdgeSource(path, "npy", src, dst, edges, num_nodes)


def open_npz_edges(path: str, num_nodes: int | None = None) -> ArrayEdgeSource:
    """Edges of an .npz holding a 2 x M or M x 2 array ('edge_index', or the only array beside
    'num_nodes', such as np.savez's 'arr_0') or 'src' and 'dst'; 'num_nodes' is the node count unless
    `num_nodes` is declared."""
    keys = npz_keys(path)
    arrays = [key for key in keys if key != "num_nodes"]
    if "edge_index" in keys or len(arrays) == 1:
        key = "edge_index" if "edge_index" in keys else arrays[0]
        src, dst, edges = edge_index_columns(ArrayRef(path, key))
    elif "src" in keys and "dst" in keys:
        src, dst, edges = src_dst_columns(path)
    else:
        found = ", ".join(keys) or "none"
        raise InputError(path, f"expected {NPZ_LAYOUTS}; found: {found}")
    if num_nodes is None and "num_nodes" in keys:
        num_nodes = npz_num_nodes(path)
    return ArrayEdgeSource(path, "npz", src, dst, edges, num_nodes)
