"""One rank's part of a sample, from what it already holds: no communication, work in B, never in N.

A band's members are the sample's nodes whose stored position lies in the band, in position order
(`BandNodes`). A shard's sampled block keeps the entries of its member rows whose column is a member
column, off-diagonal weights rescaled by 1/p (a self-loop, row and column the same member, keeps its
weight). On the CPU numba passes cut (`cut_kernels`, GIL-free so it runs beside the training step, with
the band's `column_slots`) and transpose; elsewhere whole-array torch operations (`cut_shard_torch`,
`transposed_torch`) do the same: the specification the CPU passes are tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gtool.loader import csr_tensor


@dataclass(frozen=True)
class BandMembers:
    """The sample's members in one band: band-local `positions` (ascending) and `indices` in the sample."""

    positions: torch.Tensor
    indices: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.positions.shape[0])


class BandNodes:
    """The node ids at a band's real positions, sorted once, for finding a sample's members in the band;
    on the CPU also the band's `column_slots` over its `band_size` positions (all -1 between cuts)."""

    def __init__(self, node_ids: np.ndarray, num_nodes: int, band_size: int, device: torch.device):
        ids = torch.from_numpy(np.asarray(node_ids, dtype=np.int64)).to(device)
        self.column_slots = np.full(band_size, -1, dtype=np.int32) if device.type == "cpu" else None
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
        """The transpose as CSR: entries stably sorted by column (rows stay ascending within a column); on
        the CPU by a counting sort in one numba pass."""
        if self.cols.device.type == "cpu":
            from gtool.trainer.minibatch.cut_kernels import transposed  # numba: see its module

            arrays = transposed(self.rows.numpy(), self.cols.numpy(), self.values.numpy(), self.shape[1])
            pointers, rows, values = (torch.from_numpy(array) for array in arrays)
        else:
            pointers, rows, values = transposed_torch(self.rows, self.cols, self.values, self.shape[1])
        return csr_tensor(pointers, rows, values, (self.shape[1], self.shape[0]))


def transposed_torch(
    rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, count: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pointers, rows, values) of COO entries in column order, stable, in torch operations (any device)."""
    order = torch.argsort(cols, stable=True)
    return _row_pointers(cols, count), rows[order], values[order]


def _row_pointers(rows: torch.Tensor, count: int) -> torch.Tensor:
    pointers = torch.zeros(count + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(rows, minlength=count), dim=0, out=pointers[1:])
    return pointers


def cut_shard(
    shard: torch.Tensor,
    rows: BandMembers,
    cols: BandMembers,
    rescaling: float,
    column_slots: np.ndarray | None,
) -> SampledBlock:
    """The entries of `shard` (a band-local CSR tensor) in member rows x member columns, off-diagonal weights
    times `rescaling` (1/p); the block's rows and columns are the members' places in `rows` and `cols`.
    With the column band's `column_slots` (a CPU shard), in one numba pass; else `cut_shard_torch`."""
    if column_slots is None:
        return cut_shard_torch(shard, rows, cols, rescaling)
    if shard.shape[1] > column_slots.shape[0]:
        raise ValueError(f"a shard of {shard.shape[1]} columns, slots for {column_slots.shape[0]}")
    from gtool.trainer.minibatch.cut_kernels import cut_entries  # numba: see its module

    values = shard.values()
    block_rows, block_cols, block_values = cut_entries(
        shard.crow_indices().numpy(),
        shard.col_indices().numpy(),
        values.numpy(),
        rows.positions.numpy(),
        rows.indices.numpy(),
        cols.positions.numpy(),
        cols.indices.numpy(),
        column_slots,
        values.new_tensor(rescaling).numpy()[()],
    )
    entries = (torch.from_numpy(block_rows), torch.from_numpy(block_cols), torch.from_numpy(block_values))
    return SampledBlock(*entries, (rows.count, cols.count))


def cut_shard_torch(
    shard: torch.Tensor, rows: BandMembers, cols: BandMembers, rescaling: float
) -> SampledBlock:
    """`cut_shard` in whole-array torch operations on any device: one binary search per member row entry."""
    indptr, indices, device = shard.crow_indices(), shard.col_indices(), shard.device
    starts = indptr[rows.positions]
    counts = indptr[rows.positions + 1] - starts
    row_of_entry = torch.repeat_interleave(torch.arange(rows.count, device=device), counts)
    first_of_row = torch.cumsum(counts, dim=0) - counts
    entries = torch.arange(row_of_entry.shape[0], device=device) + (starts - first_of_row)[row_of_entry]
    columns = indices[entries].long()  # a mini-batch run's shards have int32 indices
    member_columns = torch.cat([cols.positions, torch.tensor([shard.shape[1]], device=device)])
    slot = torch.searchsorted(member_columns, columns)
    kept = torch.nonzero(member_columns[slot] == columns).squeeze(1)
    block_rows, block_cols = row_of_entry[kept], slot[kept]
    values = shard.values()[entries[kept]]
    self_loop = rows.indices[block_rows] == cols.indices[block_cols]
    values = torch.where(self_loop, values, values * rescaling)
    return SampledBlock(block_rows, block_cols, values, (rows.count, cols.count))
