"""Graph sources for edge files, the format picked from the file name."""

from __future__ import annotations

from collections.abc import Callable

from gtool.errors import InputError
from gtool.preprocess.sources.base import GraphSource
from gtool.preprocess.sources.benchmark import BENCHMARK_KEYS, BenchmarkSource
from gtool.preprocess.sources.fileinfo import check_readable
from gtool.preprocess.sources.npzmember import npz_keys
from gtool.preprocess.sources.numpyedges import open_npy_edges, open_npz_edges
from gtool.preprocess.sources.parquetedges import ParquetEdgeSource
from gtool.preprocess.sources.sparse.scipynpz import SCIPY_KEYS, open_scipy_npz
from gtool.preprocess.sources.text.mtx import MtxSource
from gtool.preprocess.sources.text.snap import TextEdgeSource

Opener = Callable[[str, int | None], GraphSource]


def open_npz(path: str, num_nodes: int | None = None) -> GraphSource:
    """An .npz in any layout gtool reads: a scipy.sparse matrix, a GNN-benchmark graph or edge arrays."""
    keys = set(npz_keys(path))
    if keys >= SCIPY_KEYS:
        return open_scipy_npz(path, num_nodes)
    if keys >= BENCHMARK_KEYS:
        return BenchmarkSource(path, num_nodes)
    return open_npz_edges(path, num_nodes)


OPENERS: dict[str, Opener] = {
    ".mtx": MtxSource,
    ".npy": open_npy_edges,
    ".npz": open_npz,
    ".parquet": ParquetEdgeSource,
    ".pq": ParquetEdgeSource,
}
GZIPPABLE = {".mtx"}


def file_format(path: str) -> str:
    """The format extension of `path` ('.mtx', '.npy', ...), or '' for a text edge list."""
    name = path.lower()
    gzipped = name.endswith(".gz")
    name = name.removesuffix(".gz")
    for ext in OPENERS:
        if name.endswith(ext):
            if gzipped and ext not in GZIPPABLE:
                raise InputError(path, f"a gzipped {ext} file cannot be read; decompress it first")
            return ext
    return ""


def open_edge_file(path: str, num_nodes: int | None = None) -> GraphSource:
    """The graph in an edge file: .mtx[.gz] Matrix Market, .npy/.npz arrays, .parquet tables, or else
    a text edge list (.txt .tsv .csv .el .edges .edgelist ..., optionally .gz).

    `num_nodes` is the user's declared node count (every id must be below it); without it, a count
    declared by the file (Matrix Market size line, .npz 'num_nodes') is used, else max id + 1.
    """
    if num_nodes is not None and num_nodes < 1:
        raise InputError(path, f"expected a declared node count >= 1, got {num_nodes}")
    check_readable(path)
    opener = OPENERS.get(file_format(path), TextEdgeSource)
    return opener(path, num_nodes)
