"""One rank's part of a sample, from what it already holds: no communication, work in B, never in N.

A band's members are the sample's nodes whose stored position (in the band's node order) lies in the band,
in position order; `BandNodes` finds them by one binary search of the sorted sample into the band's node
ids, sorted once per run. A shard's sampled block keeps the entries of its member rows whose column is a
member column (one binary search per entry of the member rows), with the off-diagonal weights rescaled
by 1/p. An entry is a self-loop when its row and column are the same node, i.e. the same sample member
(perm/r[row] == perm/c[col] of A0, the other way round for A1): its weight stays as stored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gtool.loader.csr import csr_tensor


@dataclass(frozen=True)
class BandMembers:
    """The sample's members in one band: band-local `positions` (ascending) and `indices` in the sample."""

    positions: torch.Tensor
    indices: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.positions.shape[0])


class BandNodes:
    """The node ids at a band's real positions, sorted once, for finding a sample's members in the band."""

    def __init__(self, node_ids: np.ndarray, num_nodes: int, device: torch.device):
        ids = torch.from_numpy(np.asarray(node_ids, dtype=np.int64)).to(device)
        self.sorted_ids, order = torch.sort(ids)
        sentinel = torch.tensor([num_nodes], dtype=torch.int64, device=device)  # past every node id
        self.sorted_ids = torch.cat([self.sorted_ids, sentinel])
        self.positions = torch.cat([order, sentinel])

    def members(self, sample: torch.Tensor) -> BandMembers:
        """The members of the sorted `sample` (node ids) in this band, in position order."""
        slot = torch.searchsorted(self.sorted_ids, sample)
        indices = torch.nonzero(self.sorted_ids[slot] == sample).squeeze(1)
        positions = self.positions[slot[indices]]
        positions, order = torch.sort(positions)
        return BandMembers(positions, indices[order])


@dataclass(frozen=True)
class SampledBlock:
    """A_S's block of one shard: COO entries in (row, col) order over member rows x member columns."""

    rows: torch.Tensor
    cols: torch.Tensor
    values: torch.Tensor
    shape: tuple[int, int]

    def csr(self) -> torch.Tensor:
        return csr_tensor(_row_pointers(self.rows, self.shape[0]), self.cols, self.values, self.shape)

    def transpose_csr(self) -> torch.Tensor:
        """The transpose as CSR: entries stably sorted by column (rows stay ascending within a column)."""
        order = torch.argsort(self.cols, stable=True)
        pointers = _row_pointers(self.cols, self.shape[1])
        return csr_tensor(pointers, self.rows[order], self.values[order], (self.shape[1], self.shape[0]))


def _row_pointers(rows: torch.Tensor, count: int) -> torch.Tensor:
    pointers = torch.zeros(count + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=count), dim=0, out=pointers[1:])
    return pointers


def cut_shard(shard: torch.Tensor, rows: BandMembers, cols: BandMembers, rescaling: float) -> SampledBlock:
    """The entries of `shard` (a band-local CSR tensor) in member rows x member columns, off-diagonal weights
    times `rescaling` (1/p); the block's rows and columns are the members' places in `rows` and `cols`."""
    indptr, indices, device = shard.crow_indices(), shard.col_indices(), shard.device
    starts = indptr[rows.positions]
    counts = indptr[rows.positions + 1] - starts
    row_of_entry = torch.repeat_interleave(torch.arange(rows.count, device=device), counts)
    first_of_row = torch.cumsum(counts, dim=0) - counts
    entries = torch.arange(row_of_entry.shape[0], device=device) + (starts - first_of_row)[row_of_entry]
    columns = indices[entries]
    member_columns = torch.cat([cols.positions, torch.tensor([shard.shape[1]], device=device)])
    slot = torch.searchsorted(member_columns, columns)
    kept = torch.nonzero(member_columns[slot] == columns).squeeze(1)
    block_rows, block_cols = row_of_entry[kept], slot[kept]
    values = shard.values()[entries[kept]]
    self_loop = rows.indices[block_rows] == cols.indices[block_cols]
    values = torch.where(self_loop, values, values * rescaling)
    return SampledBlock(block_rows, block_cols, values, (rows.count, cols.count))
