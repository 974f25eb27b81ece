"""Adjacency shards cut into row blocks."""

from __future__ import annotations

import pytest
import scipy.sparse as sp
import torch

from gtool.trainer.models.serial import torch_csr
from gtool.trainer.nn.adjacency import split_rows


@pytest.mark.parametrize("blocks", [1, 2, 3, 7, 40])
def test_row_blocks_cover_the_matrix(blocks: int) -> None:
    matrix = sp.random(23, 17, density=0.2, random_state=1, format="csr")
    dense = torch.from_numpy(matrix.toarray())
    pieces = split_rows(torch_csr(matrix, torch.float64), blocks)
    assert pieces[0][0] == 0 and pieces[-1][1] == 23 and len(pieces) <= blocks
    for (lo, hi, block), following in zip(pieces, pieces[1:] + [(23, None, None)], strict=True):
        assert hi == following[0]
        assert torch.equal(block.to_dense(), dense[lo:hi])
