"""A rank reads only the tiles it needs, and a bad store fails with an error naming what is wrong."""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest
import torch
import zarr

from gtool.errors import StoreError
from gtool.loader import RankData, load_rank
from gtool.store import layout
from tests.loader.conftest import CUT, ReferenceStore
from tests.loader.expected import layer_rects, tiles_overlapped
from tests.support.storefiles import array_chunks

pytestmark = pytest.mark.parametrize("reference", [CUT], indirect=True, ids=str, scope="module")

RANK_CASES = [((3, 2, 1), 4, 4), ((2, 2, 2), 6, 3)]


def needed_tiles(
    ref: ReferenceStore, dims: tuple[int, int, int], rank: int, layers: int
) -> set[tuple[int, int, int]]:
    n, tiles = ref.store.num_nodes, ref.store.tiles
    return tiles_overlapped(layer_rects(dims, rank, layers, n, ref.store.two_matrices), n, tiles)


def copy_store(ref: ReferenceStore, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.zarr"
    shutil.copytree(ref.path, copy)
    return copy


def assert_same_rank_data(got: RankData, want: RankData) -> None:
    assert got.layer_keys == want.layer_keys and got.shards.keys() == want.shards.keys()
    for key, shard in got.shards.items():
        for name in ("matrix", "transpose"):
            a, b = getattr(shard, name), getattr(want.shards[key], name)
            assert torch.equal(a.crow_indices(), b.crow_indices())
            assert torch.equal(a.col_indices(), b.col_indices())
            assert torch.equal(a.values(), b.values())
    for name in ("features", "labels", "split"):
        assert torch.equal(getattr(got, name), getattr(want, name))


@pytest.mark.parametrize(("dims", "rank", "layers"), RANK_CASES)
def test_a_rank_loads_the_same_without_the_tiles_it_does_not_need(
    reference: ReferenceStore, tmp_path: Path, dims: tuple[int, int, int], rank: int, layers: int
) -> None:
    copy = copy_store(reference, tmp_path)
    needed = needed_tiles(reference, dims, rank, layers)
    tiles = reference.store.tiles
    unneeded = [
        (m, i, j)
        for m, i, j in itertools.product(reference.store.matrices, range(tiles), range(tiles))
        if (m, i, j) not in needed
    ]
    assert unneeded, "the case must leave some tiles unread"
    for m, i, j in unneeded:
        shutil.rmtree(copy / layout.tile_group(m, i, j))
    got = load_rank(str(copy), dims, rank, layers)
    assert_same_rank_data(got, load_rank(reference.store, dims, rank, layers))
    assert got.read.tiles >= len(needed)


@pytest.fixture
def in_memory_copy(reference: ReferenceStore) -> Iterator[str]:
    """The store copied into fsspec's in-memory filesystem, as a memory:// URL."""
    memory = fsspec.filesystem("memory")
    memory.put(reference.path, "/loader-test.zarr", recursive=True)
    yield "memory://loader-test.zarr"
    memory.rm("/loader-test.zarr", recursive=True)


def test_loads_from_a_path_and_fsspec_urls(reference: ReferenceStore, in_memory_copy: str) -> None:
    by_store = load_rank(reference.store, (2, 2, 2), 5, 2)
    for location in (reference.path, f"file://{reference.path}", in_memory_copy):
        assert_same_rank_data(load_rank(location, (2, 2, 2), 5, 2), by_store)


def tile_error(copy: Path, matrix: int, i: int, j: int) -> str:
    """A regex for an error naming the store, the matrix and the tile."""
    return f"{re.escape(str(copy))}.*A{matrix} tile \\({i}, {j}\\)"


def a_needed_tile(ref: ReferenceStore) -> tuple[int, int, int]:
    dims, rank, layers = RANK_CASES[0]
    return sorted(needed_tiles(ref, dims, rank, layers))[-1]


def test_a_deleted_needed_tile_is_named(reference: ReferenceStore, tmp_path: Path) -> None:
    copy = copy_store(reference, tmp_path)
    m, i, j = a_needed_tile(reference)
    shutil.rmtree(copy / layout.tile_group(m, i, j))
    with pytest.raises(StoreError, match=tile_error(copy, m, i, j)):
        load_rank(str(copy), *RANK_CASES[0])


def test_a_corrupt_tile_chunk_is_named(reference: ReferenceStore, tmp_path: Path) -> None:
    copy = copy_store(reference, tmp_path)
    m, i, j = a_needed_tile(reference)
    chunk = array_chunks(copy / layout.tile_array(m, i, j, "val"))[0]
    chunk.write_bytes(b"not zstd at all")
    damaged = f": array {layout.tile_array(m, i, j, 'val')}, chunk 0: stored checksum does not match"
    with pytest.raises(StoreError, match=tile_error(copy, m, i, j) + damaged):
        load_rank(str(copy), *RANK_CASES[0])


def test_a_deleted_tile_chunk_is_named_as_missing(reference: ReferenceStore, tmp_path: Path) -> None:
    """Zarr reads a missing chunk as zeros; gtool stores every chunk, so a missing one is damage."""
    copy = copy_store(reference, tmp_path)
    m, i, j = a_needed_tile(reference)
    for chunk in array_chunks(copy / layout.tile_array(m, i, j, "row")):
        chunk.unlink()
    missing = f": array {layout.tile_array(m, i, j, 'row')}, chunk 0: missing"
    with pytest.raises(StoreError, match=tile_error(copy, m, i, j) + missing):
        load_rank(str(copy), *RANK_CASES[0])


def test_an_out_of_range_tile_is_named(reference: ReferenceStore, tmp_path: Path) -> None:
    copy = copy_store(reference, tmp_path)
    m, i, j = a_needed_tile(reference)
    col = zarr.open_array(str(copy / layout.tile_array(m, i, j, "col")), mode="r+")
    col[-1] = np.int32(10**6)
    with pytest.raises(StoreError, match=tile_error(copy, m, i, j) + ".*column index outside"):
        load_rank(str(copy), *RANK_CASES[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [({"complete": False}, "incomplete"), ({"layout": 99}, "unknown store layout 99")],
)
def test_incomplete_and_unknown_stores_are_refused(
    reference: ReferenceStore, tmp_path: Path, change: dict, message: str
) -> None:
    copy = copy_store(reference, tmp_path)
    group = zarr.open_group(str(copy), mode="r+")
    group.attrs[layout.META_KEY] = {**group.attrs[layout.META_KEY], **change}
    with pytest.raises(StoreError, match=message):
        load_rank(str(copy), (1, 1, 1), 0, 1)


def test_bad_rank_and_layer_count_are_refused(reference: ReferenceStore) -> None:
    with pytest.raises(ValueError, match="rank 8 outside a grid of 8"):
        load_rank(reference.store, (2, 2, 2), 8, 1)
    with pytest.raises(ValueError, match="layers must be >= 1"):
        load_rank(reference.store, (2, 2, 2), 0, 0)
