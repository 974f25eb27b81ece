"""Matrix Market coordinate files (.mtx, .mtx.gz) read as graphs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk
from gtool.preprocess.sources.fileinfo import MIB, describe_file
from gtool.preprocess.sources.text.file import (
    LONE_CR_ENDS,
    TextChunk,
    TextFile,
    TextFileSource,
    count_data_lines,
    has_lone_carriage_return,
    refuse_lone_carriage_return,
)
from gtool.preprocess.sources.text.parse import BYTE_ORDER_MARK, show, whole_number

BANNER = "%%MatrixMarket matrix coordinate pattern|real|integer general|symmetric|skew-symmetric"
WEIGHTED_FIELDS = {"pattern": False, "real": True, "integer": True}
MIRRORED_SYMMETRIES = {"general": False, "symmetric": True, "skew-symmetric": True}


@dataclass(frozen=True)
class MtxHeader:
    """What the banner and size line of a coordinate Matrix Market file declare."""

    field: str
    symmetry: str
    rows: int
    cols: int
    entries: int
    data_start: int
    size_line: int


def parse_banner(path: str, banner: bytes) -> tuple[str, str]:
    """(field, symmetry) of a '%%MatrixMarket matrix coordinate FIELD SYMMETRY' line."""
    words = [show(token).lower() for token in banner.split()]
    if len(words) != 5 or words[0] != "%%matrixmarket" or words[1] != "matrix":
        raise InputError(path, f"expected the banner '{BANNER}'", line=1)
    _, _, layout, value_field, symmetry = words
    if layout == "array":
        raise InputError(path, "the dense 'array' format holds no edge list; expected 'coordinate'", line=1)
    if layout != "coordinate" or value_field not in WEIGHTED_FIELDS or symmetry not in MIRRORED_SYMMETRIES:
        got = f"{layout} {value_field} {symmetry}"
        raise InputError(path, f"'{got}' is not supported; expected '{BANNER}'", line=1)
    return value_field, symmetry


def parse_size_line(path: str, tokens: list[bytes], line: int) -> tuple[int, int, int]:
    """(rows, cols, entries) of the size line of a square coordinate matrix."""
    try:
        rows, cols, entries = (whole_number(token) for token in tokens)
    except ValueError:
        raise InputError(path, "expected the size line 'ROWS COLS ENTRIES'", line=line) from None
    if min(rows, cols, entries) < 0:
        raise InputError(path, "expected non-negative ROWS COLS ENTRIES on the size line", line=line)
    if rows != cols:
        raise InputError(path, f"{rows} x {cols} is not square; an adjacency needs ROWS == COLS", line=line)
    return rows, cols, entries


def read_mtx_header(file: TextFile) -> MtxHeader:
    """Banner and size line of a coordinate Matrix Market file, and where its entries start."""
    with file.stream() as f:
        banner = f.readline(MIB)
        refuse_lone_carriage_return(file.path, banner)
        value_field, symmetry = parse_banner(file.path, banner.removeprefix(BYTE_ORDER_MARK))
        offset, line = len(banner), 1
        for text in iter(lambda: f.readline(MIB), b""):
            offset, line = offset + len(text), line + 1
            refuse_lone_carriage_return(file.path, text)
            tokens = text.split()
            if tokens and not tokens[0].startswith(b"%"):
                rows, cols, entries = parse_size_line(file.path, tokens, line)
                return MtxHeader(value_field, symmetry, rows, cols, entries, offset, line)
    raise InputError(file.path, "no size line 'ROWS COLS ENTRIES' after the banner and comments")


@dataclass(frozen=True)
class MirrorLocator:
    """Locates edges of a mirrored block: edge k >= count is the mirror of original edge off[k - count]."""

    inner: Callable[[int], tuple[int | None, str | None]]
    count: int
    off: np.ndarray = field(compare=False)

    def __call__(self, k: int) -> tuple[int | None, str | None]:
        return self.inner(k if k < self.count else int(self.off[k - self.count]))


@dataclass(frozen=True)
class MtxChunk(EdgeChunk):
    """Entry lines of a Matrix Market file: 1-based (row, col) -> 0-based edges, mirrored if symmetric;
    indices are checked in 1..size, as the file writes them (`bound` names what declares size: the size
    line, or a smaller --num-nodes)."""

    text: TextChunk
    size: int
    mirror: bool
    bound: str = "the size line"

    def read(self) -> EdgeBlock:
        block = self.text.read()
        for name, ids in (("row", block.src), ("column", block.dst)):
            bad = np.flatnonzero((ids < 1) | (ids > self.size))
            if bad.size:
                k = int(bad[0])
                raise block.error(
                    k, f"{name} index {int(ids[k])} is outside 1..{self.size} declared by {self.bound}"
                )
        src, dst = block.src - 1, block.dst - 1
        if not self.mirror:
            return EdgeBlock(src, dst, block.where, locate=block.locate)
        off = np.flatnonzero(src != dst)
        return EdgeBlock(
            np.concatenate([src, dst[off]]),
            np.concatenate([dst, src[off]]),
            block.where,
            locate=MirrorLocator(block.locate, len(src), off),
        )


class MtxSource(TextFileSource):
    """A square coordinate Matrix Market matrix as a graph: entry (i, j) is edge i-1 -> j-1.

    The size line gives the node count. Symmetric files store one triangle; their off-diagonal entries
    are mirrored so the edges are those of the full matrix. Values (real/integer) are validated as finite
    and then dropped: gtool builds the unweighted GCN adjacency.
    """

    def __init__(self, path: str, num_nodes: int | None = None):
        super().__init__(path, num_nodes)
        self.header = read_mtx_header(self.file)

    def prepare(self, workdir: str) -> None:
        """Decompress a gzipped file, then check that it holds as many entries as its size line says."""
        super().prepare(workdir)
        found = count_data_lines(self.file.plain(), self.header.data_start)
        if found != self.header.entries and has_lone_carriage_return(
            self.file.plain(), self.header.data_start
        ):
            raise InputError(self.path, LONE_CR_ENDS)
        if found != self.header.entries:
            cut = " (truncated?)" if found < self.header.entries else ""
            raise InputError(
                self.path,
                f"the size line declares {self.header.entries:,} entries but the file holds {found:,} "
                f"entry lines{cut}",
                line=self.header.size_line,
            )

    def num_nodes(self) -> int:
        return self.header.rows if self.declared_nodes is None else self.declared_nodes

    def edge_chunks(self, edges_per_chunk: int) -> list[MtxChunk]:
        weighted = WEIGHTED_FIELDS[self.header.field]
        mirror = MIRRORED_SYMMETRIES[self.header.symmetry]
        size, bound = self.header.rows, "the size line"
        if self.declared_nodes is not None and self.declared_nodes < size:
            size, bound = self.declared_nodes, f"--num-nodes (the size line declares {self.header.rows})"
        return [
            MtxChunk(TextChunk(self.file.plain(), self.path, start, end, weighted), size, mirror, bound)
            for start, end in self.file.ranges(self.header.data_start, edges_per_chunk)
        ]

    def describe(self) -> dict[str, Any]:
        return describe_file(
            self.path,
            "matrixmarket",
            compression=self.file.compression,
            field=self.header.field,
            symmetry=self.header.symmetry,
            rows=self.header.rows,
            entries=self.header.entries,
        )
