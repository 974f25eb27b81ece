"""Features permuted by sequential passes (route, assemble) write the same chunks, byte for byte, as the
per-chunk gather, and read the input only in sequential blocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from gtool.errors import InputError
from gtool.preprocess.budget import MB, Budget
from gtool.preprocess.nodes.feature_shuffle import (
    INDEX_BYTES_PER_ROW,
    FeatureShuffle,
    assemble_bucket,
    plan_shuffle,
    route_block,
)
from gtool.preprocess.nodes.node_writer import feature_tasks, write_feature_rows
from gtool.preprocess.permutation import inverse
from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.nodes.files import FeatureArray
from gtool.preprocess.spill import save_to
from gtool.store import layout
from gtool.store.writing.chunk_writer import ChunkSink, array_metadata


def chunk_files(store: Path) -> dict[str, bytes]:
    folder = store / layout.FEATURES
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def shuffled(tmp_path: Path, features: FeatureArray, pc: np.ndarray, chunk: int, block: int, bucket: int):
    """The features permuted by route + assemble into tmp_path/shuffled, with their spill files."""
    n, f = pc.shape[0], features.num_features
    metadata = array_metadata("float32", (n, f), (chunk, f))
    store = tmp_path / "shuffled"
    ChunkSink(str(store)).put_array(layout.FEATURES, metadata)
    positions, pc_path = str(tmp_path / "ipc.npy"), str(tmp_path / "pc.npy")
    save_to(inverse(pc), positions)
    save_to(pc, pc_path)
    shuffle = FeatureShuffle(
        n, block, bucket, positions, pc_path, str(tmp_path / "spill"), str(store), metadata
    )
    routed = [route_block(b, shuffle, features) for b in reversed(range(shuffle.blocks))]
    written = sum(assemble_bucket(k, shuffle, routed) for k in range(shuffle.buckets))
    assert written == n * f * 4
    return store, metadata


@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_route_and_assemble_write_the_gathers_chunks_byte_for_byte(tmp_path, dtype):
    """Uneven sizes: 1003 rows, chunks of 7 rows, blocks of 100 rows, buckets of 3 chunks (21 rows)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((1003, 5)) * 100).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    features = FeatureArray(ArrayRef(str(tmp_path / "x.npy")))
    pc = rng.permutation(1003).astype(np.int64)
    store, metadata = shuffled(tmp_path, features, pc, chunk=7, block=100, bucket=21)

    gathered = tmp_path / "gathered"
    ChunkSink(str(gathered)).put_array(layout.FEATURES, metadata)
    pc_path = str(tmp_path / "pc.npy")
    tasks = feature_tasks(str(gathered), pc_path, metadata, workers=1)
    assert [t.stop - t.start for t in tasks] == [28] * 35 + [23]  # 4 chunks a task: 144 chunks, 32 a worker
    for task in tasks:
        write_feature_rows(task, features)
    assert chunk_files(store) == chunk_files(gathered)
    assert len(chunk_files(store)) == 1003 // 7 + 2  # every chunk and zarr.json


def test_one_dimensional_features_and_the_identity(tmp_path):
    x = np.arange(50, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    features = FeatureArray(ArrayRef(str(tmp_path / "x.npy")))
    store, _ = shuffled(tmp_path, features, np.arange(50), chunk=4, block=9, bucket=8)
    assert np.array_equal(zarr.open_array(str(store), path=layout.FEATURES)[:, 0], x)


@pytest.mark.parametrize("save", ["npy", "stored npz", "deflated npz"])
def test_fortran_order_features_write_the_c_order_runs_chunks(tmp_path, save):
    x = np.arange(203 * 4, dtype=np.float64).reshape(203, 4) / 7
    pc = np.random.default_rng(2).permutation(203).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    c_order = FeatureArray(ArrayRef(str(tmp_path / "x.npy")))
    want, _ = shuffled(tmp_path / "c", c_order, pc, chunk=7, block=50, bucket=21)
    fortran = np.asfortranarray(x)
    path = tmp_path / ("xf.npy" if save == "npy" else "xf.npz")
    if save == "npy":
        np.save(path, fortran)
    else:
        (np.savez if save == "stored npz" else np.savez_compressed)(path, x=fortran)
    features = FeatureArray(ArrayRef(str(path), None if save == "npy" else "x"))
    features.prepare(str(tmp_path / "work"))
    assert features.read_block(10, 60).flags.c_contiguous
    got, _ = shuffled(tmp_path / "f", features, pc, chunk=7, block=50, bucket=21)
    assert chunk_files(got) == chunk_files(want)


def test_a_non_finite_value_is_named_by_its_input_row(tmp_path):
    x = np.ones((30, 3))
    x[17, 2] = np.inf
    np.save(tmp_path / "x.npy", x)
    features = FeatureArray(ArrayRef(str(tmp_path / "x.npy")))
    with pytest.raises(InputError, match=r"x.npy, array\[17, 2\]: feature inf is not a finite float32"):
        features.read_block(10, 20)


def test_feature_pieces_follow_the_budget():
    budget = Budget(2 << 30, 8_000_000, 1)
    piece = budget.feature_piece_bytes(8_000_000 * 128 * 4)
    assert piece <= budget.per_task // 2
    assert 256 * MB < piece <= 8_000_000 * 128 * 4 // 8
    assert Budget(2 << 30, 1000, 2).feature_piece_bytes(1000) == 8 * MB


def test_blocks_and_buckets_fit_the_piece_and_buckets_hold_whole_chunks():
    metadata = array_metadata("float32", (10_000, 3), (70, 3))
    shuffle = plan_shuffle("s.zarr", metadata, "ipc.npy", "pc.npy", "spill", 500 * (12 + INDEX_BYTES_PER_ROW))
    assert shuffle.block_rows == 500 and shuffle.bucket_rows == 490
    assert (shuffle.blocks, shuffle.buckets) == (20, 21)
    tiny = plan_shuffle("s.zarr", metadata, "ipc.npy", "pc.npy", "spill", 1)
    assert tiny.block_rows == 1 and tiny.bucket_rows == 70
