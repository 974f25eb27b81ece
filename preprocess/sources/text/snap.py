"""SNAP-style text edge lists: one 'src dst [weight ...]' per line, maybe gzipped."""

from __future__ import annotations

from typing import Any

from gtool.preprocess.sources.fileinfo import describe_file
from gtool.preprocess.sources.text.file import TextChunk, TextFileSource


class TextEdgeSource(TextFileSource):
    """Edges of a text edge list (.txt .tsv .csv .el .edges .edgelist, optionally .gz).

    Tokens are separated by whitespace or commas; '#' or '%' starts a comment that runs to the end of
    the line, and blank lines are skipped. Node ids are 0-based integers. When the file's first edge line
    has a third column, every line's third column is parsed and validated as a finite weight, but gtool
    builds the unweighted GCN adjacency, so weights are then dropped; further columns are ignored.
    """

    def weighted(self) -> bool:
        """Whether the first edge line has a weight column."""
        return len(self.file.first_data_tokens()) >= 3

    def edge_chunks(self, edges_per_chunk: int) -> list[TextChunk]:
        weighted = self.weighted()
        return [
            TextChunk(self.file.plain(), self.path, start, end, weighted)
            for start, end in self.file.ranges(0, edges_per_chunk)
        ]

    def describe(self) -> dict[str, Any]:
        weights = "validated, not used" if self.weighted() else None
        return describe_file(self.path, "edgelist", compression=self.file.compression, weights=weights)
