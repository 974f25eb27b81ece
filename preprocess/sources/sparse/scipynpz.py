"""scipy.sparse `save_npz` files (csr, csc or coo; deflated or not) read as graphs.

Entry (i, j) of the square matrix is edge i -> j, every stored entry an edge (explicit zeros too, as
PyG's from_scipy_sparse_matrix reads them); values are not read. COO row and col arrays are read like
the src and dst arrays of an edge .npz; CSR and CSC go through the compressed reader.
"""

from __future__ import annotations

from typing import Any

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, load_array
from gtool.preprocess.sources.base import GraphSource
from gtool.preprocess.sources.fileinfo import FileSource, describe_file
from gtool.preprocess.sources.numpyedges import ArrayEdgeSource, src_dst_columns
from gtool.preprocess.sources.sparse.compressed import Compressed, CompressedChunk, read_shape

SCIPY_KEYS = frozenset({"format", "shape"})


def read_format(path: str) -> str:
    """The 'format' string scipy stores ('csr', 'csc', 'coo', ...)."""
    ref = ArrayRef(path, "format")
    value = load_array(ref)
    if value.dtype.kind not in "SU" or value.size != 1:
        raise InputError(ref.where, f"expected a format name such as 'csr', got {value!r}")
    text = value.item()
    return text.decode("ascii", "replace") if isinstance(text, bytes) else str(text)


def square_size(path: str, key: str) -> int:
    """N of the N x N shape in array `key`; an adjacency must be square."""
    rows, cols = read_shape(path, key)
    if rows != cols:
        raise InputError(
            f"{path}[{key}]", f"{rows} x {cols} is not square; an adjacency needs rows == columns"
        )
    return rows


class CompressedSource(FileSource):
    """A square CSR or CSC matrix of an .npz as a graph; its shape gives the node count."""

    def __init__(self, path: str, num_nodes: int | None, matrix: Compressed, fmt: str, size: int):
        super().__init__(path, num_nodes)
        self.matrix, self.fmt, self.size = matrix, fmt, size

    def num_nodes(self) -> int:
        return self.size if self.declared_nodes is None else self.declared_nodes

    def prepare(self, workdir: str) -> None:
        self.matrix = self.matrix.prepared(workdir)

    def edge_chunks(self, edges_per_chunk: int) -> list[CompressedChunk]:
        return self.matrix.chunks(edges_per_chunk)

    def describe(self) -> dict[str, Any]:
        return describe_file(self.path, self.fmt, shape=[self.size, self.size], entries=self.matrix.entries)


def open_scipy_npz(path: str, num_nodes: int | None = None) -> GraphSource:
    """The square matrix of a scipy.sparse save_npz file as a graph (csr, csc or coo)."""
    fmt = read_format(path)
    size = square_size(path, "shape")
    if fmt == "coo":
        src, dst, edges = src_dst_columns(path, ("row", "col"))
        return ArrayEdgeSource(path, "scipy-coo", src, dst, edges, size if num_nodes is None else num_nodes)
    if fmt in ("csr", "csc"):
        matrix = Compressed.open(path, "", fmt == "csr", (size, size))
        return CompressedSource(path, num_nodes, matrix, f"scipy-{fmt}", size)
    raise InputError(
        f"{path}[format]",
        f"format '{fmt}' is not supported; expected csr, csc or coo (convert with .tocsr())",
    )
