"""Parquet edge tables: integer columns 'src' and 'dst', read by whole row groups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import as_node_ids
from gtool.preprocess.sources.base import EdgeBlock, EdgeChunk
from gtool.preprocess.sources.fileinfo import FileSource, check_readable, describe_file

COLUMNS = ("src", "dst")


def open_parquet(path: str) -> pq.ParquetFile:
    """The Parquet file at `path`, or an InputError saying why it is not one."""
    check_readable(path)
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, f"expected a Parquet file: {exc}") from None


def row_label(row: int) -> str:
    """How messages name a table row."""
    return f"row {row}"


@dataclass(frozen=True)
class RowLocator:
    """Maps edge k of a Parquet chunk's block to its table row."""

    first_row: int

    def __call__(self, k: int) -> tuple[int | None, str | None]:
        return None, row_label(self.first_row + k)


@dataclass(frozen=True)
class ParquetChunk(EdgeChunk):
    """Row groups [first_group, last_group) of a Parquet edge table, whose first row is `first_row`."""

    path: str
    first_group: int
    last_group: int
    first_row: int

    def read(self) -> EdgeBlock:
        table = open_parquet(self.path).read_row_groups(
            range(self.first_group, self.last_group), columns=COLUMNS
        )
        ids = [self.column_ids(table.column(name), name) for name in COLUMNS]
        return EdgeBlock(ids[0], ids[1], self.path, locate=RowLocator(self.first_row))

    def column_ids(self, column: pa.ChunkedArray, name: str) -> np.ndarray:
        """Column `name` as int64 node ids; nulls and non-integers fail naming their row."""
        if column.null_count:
            k = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(
                self.path, f"'{name}' is null; expected a node id", index=row_label(self.first_row + k)
            )
        values = column.to_numpy()
        return as_node_ids(values, self.path, lambda k: f"{row_label(self.first_row + k)}, column '{name}'")


class ParquetEdgeSource(FileSource):
    """Edges of a Parquet table with integer columns 'src' and 'dst' (other columns are ignored).

    A chunk is one or more whole row groups: row groups larger than the chunk size are not split, so
    write files with row groups of at most a few million rows (pyarrow's default is 1Mi rows).
    """

    def __init__(self, path: str, num_nodes: int | None = None):
        super().__init__(path, num_nodes)
        parquet = open_parquet(path)
        schema = parquet.schema_arrow
        for name in COLUMNS:
            if name not in schema.names:
                raise InputError(path, f"expected columns 'src' and 'dst'; found: {', '.join(schema.names)}")
            kind = schema.field(name).type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
                raise InputError(path, f"expected integer node ids in column '{name}', got type {kind}")
        metadata = parquet.metadata
        self.group_rows = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]

    def edge_count(self) -> int:
        return sum(self.group_rows)

    def edge_chunks(self, edges_per_chunk: int) -> list[ParquetChunk]:
        chunks: list[ParquetChunk] = []
        first_group, first_row, rows = 0, 0, 0
        for group, count in enumerate(self.group_rows):
            if rows and rows + count > edges_per_chunk:
                chunks.append(ParquetChunk(self.path, first_group, group, first_row))
                first_group, first_row, rows = group, first_row + rows, 0
            rows += count
        chunks.append(ParquetChunk(self.path, first_group, len(self.group_rows), first_row))
        return chunks

    def describe(self) -> dict[str, Any]:
        return describe_file(
            self.path, "parquet", edges=sum(self.group_rows), row_groups=len(self.group_rows)
        )
