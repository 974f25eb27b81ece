"""A matrix the ranks hold in blocks of permuted rows, written as a Zarr array in the original node order.

Rows are un-permuted through the store's perm/r or perm/c and dealt to the ranks in whole chunks: rank w
writes chunks [K w / W, K (w + 1) / W) of the K chunks of the array. One all-to-all moves each held row
to the rank writing its chunk, so no rank ever holds more than its blocks and the rows it writes. Chunks
are encoded with the store's codecs (compressed, crc32c-checked: gtool.store.writing.chunk_writer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from gtool.errors import StoreError
from gtool.geometry.bands import Band, ceil_div
from gtool.loader import read_node_ids
from gtool.store import layout
from gtool.store.reader import Store
from gtool.store.writing.chunk_writer import ChunkSink, array_metadata, write_chunk
from gtool.trainer.comm.groups import AxisGroup


@dataclass(frozen=True)
class HeldBlock:
    """What one rank holds of an N x width matrix: rows `rows` of the `order` ('r' or 'c') permutation,
    columns `cols`; `writes` is False on a rank whose block another rank (a replica) sends."""

    values: torch.Tensor
    rows: Band
    order: str
    cols: Band
    writes: bool


def chunk_bounds(num_rows: int, chunk_rows: int, ranks: int) -> np.ndarray:
    """First original row each rank writes, and num_rows last: whole chunks, dealt evenly."""
    chunks = ceil_div(num_rows, chunk_rows)
    firsts = np.arange(ranks + 1, dtype=np.int64) * chunks // ranks * chunk_rows
    return np.minimum(firsts, num_rows)


def _all_to_all(group: AxisGroup, send: torch.Tensor, send_counts: list[int], recv_counts: list[int]):
    """Rows of `send` (grouped by destination, send_counts each) to every rank; rows from each, in order."""
    device = group.device if dist.get_backend(group.group) == "nccl" else torch.device("cpu")
    received = send.new_empty((sum(recv_counts), *send.shape[1:]), device=device)
    dist.all_to_all_single(
        received, send.to(device).contiguous(), recv_counts, send_counts, group=group.group
    )
    return received.cpu()


def _exchange(
    group: AxisGroup, ids: np.ndarray, values: torch.Tensor, bounds: np.ndarray
) -> tuple[list[np.ndarray], list[torch.Tensor]]:
    """Each rank's rows (original ids and values) sent to the rank whose chunks hold them: what this
    rank received, per source rank."""
    destination = np.searchsorted(bounds, ids, side="right") - 1
    order = np.argsort(destination, kind="stable")
    send_counts = np.bincount(destination, minlength=group.size).astype(np.int64)
    if group.group is None:
        return [ids[order]], [values[torch.from_numpy(order)]]
    counts = torch.from_numpy(send_counts)
    recv_counts = _all_to_all(group, counts, [1] * group.size, [1] * group.size).tolist()
    sent = send_counts.tolist()
    got_ids = _all_to_all(group, torch.from_numpy(ids[order]), sent, recv_counts).numpy()
    got_values = _all_to_all(group, values[torch.from_numpy(order)], sent, recv_counts)
    splits = np.cumsum([0, *recv_counts])
    ranges = list(zip(splits[:-1], splits[1:], strict=True))
    return [got_ids[lo:hi] for lo, hi in ranges], [got_values[lo:hi] for lo, hi in ranges]


def write_node_rows(
    sink: ChunkSink,
    path: str,
    store: Store,
    held: HeldBlock,
    sources: list[Band],
    width: int,
    group: AxisGroup,
) -> int:
    """Write the N x `width` matrix whose blocks the ranks of `group` hold as the array `path` in the
    original node order; `sources[r]` is the column band rank r holds. Returns the rows this rank wrote.

    Every rank of `group` must call it; rank 0 writes the array's metadata.
    """
    num_nodes = store.num_nodes
    dtype = str(held.values.dtype).removeprefix("torch.")
    chunk_rows = min(layout.feature_chunk_rows(width), max(1, num_nodes))
    metadata = array_metadata(dtype, (num_nodes, width), (chunk_rows, width))
    bounds = chunk_bounds(num_nodes, chunk_rows, group.size)
    if held.writes:
        ids = read_node_ids(store, held.order, held.rows)
        values = held.values[: held.rows.real].detach().cpu()
    else:
        ids = np.zeros(0, dtype=np.int64)
        values = held.values.new_zeros((0, held.values.shape[1]), device="cpu")
    got_ids, got_values = _exchange(group, ids, values, bounds)
    first, last = int(bounds[group.index]), int(bounds[group.index + 1])
    out = np.zeros((last - first, width), dtype=dtype)
    column_bands = {band for band in sources if band.real}
    pieces = np.zeros(last - first, dtype=np.int64)
    for source_ids, source_values, cols in zip(got_ids, got_values, sources, strict=True):
        out[source_ids - first, cols.start : cols.stop] = source_values[:, : cols.real].numpy()
        if cols.real:
            pieces += np.bincount(source_ids - first, minlength=last - first)
    if (pieces != len(column_bands)).any():  # each row once from every column band, else ids repeat
        row = first + int(np.flatnonzero(pieces != len(column_bands))[0])
        raise StoreError(
            f"{store.location}: array {layout.PERMS[held.order]}: node {row} appears {pieces[row - first]} "
            f"times over {len(column_bands)} column band(s) of {path}, not once each: the permutation "
            "repeats node ids (the store is damaged; gtool verify names it)"
        )
    if group.index == 0:
        sink.put_array(path, metadata)
    for chunk in range(first // chunk_rows, ceil_div(last, chunk_rows)):
        lo, hi = chunk * chunk_rows, min((chunk + 1) * chunk_rows, num_nodes)
        write_chunk(sink, path, metadata, chunk, out[lo - first : hi - first])
    return last - first
