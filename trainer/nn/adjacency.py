"""Adjacency shards as the SpMMs use them: CSR and its transpose, cut into row blocks of equal height."""

from __future__ import annotations

import torch

from gtool.loader import AdjacencyShard, csr_tensor

RowBlock = tuple[int, int, torch.Tensor]


def csr_row_block(csr: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of a sparse CSR matrix, as a CSR matrix sharing its index and value memory."""
    crow = csr.crow_indices()
    lo, hi = int(crow[start]), int(crow[stop])
    return csr_tensor(
        crow[start : stop + 1] - lo,
        csr.col_indices()[lo:hi],
        csr.values()[lo:hi],
        (stop - start, csr.shape[1]),
    )


def split_rows(csr: torch.Tensor, blocks: int) -> list[RowBlock]:
    """`csr` cut into at most `blocks` row blocks of equal height, with their row ranges.

    Equal heights, not equal nonzeros: the ranks that reduce a block together hold different shards with
    the same rows, and must cut them at the same rows.
    """
    rows = csr.shape[0]
    if blocks <= 1 or rows <= 1:
        return [(0, rows, csr)]
    bounds = sorted({rows * k // blocks for k in range(blocks + 1)})
    return [(lo, hi, csr_row_block(csr, lo, hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


class BlockedAdjacency:
    """A sparse CSR matrix and its transpose, cast to the training dtype and cut into row blocks (no
    transpose: forward only, as a mini-batch run's full-graph evaluation)."""

    def __init__(self, matrix: torch.Tensor, transpose: torch.Tensor | None, blocks: int, dtype: torch.dtype):
        self.shape = tuple(matrix.shape)
        self.nnz = int(matrix.values().shape[0])
        self.blocks = split_rows(matrix.to(dtype), blocks)
        self.transpose_blocks = [] if transpose is None else split_rows(transpose.to(dtype), blocks)

    @classmethod
    def of(cls, shard: AdjacencyShard, blocks: int, dtype: torch.dtype) -> BlockedAdjacency:
        """An adjacency shard and its stored transpose."""
        return cls(shard.matrix, shard.transpose, blocks, dtype)
