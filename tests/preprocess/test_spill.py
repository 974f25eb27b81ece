"""Spill arrays read back exactly as np.save wrote them, memory-mapped read-only, in memory or a slice at a
time into a buffer; spill files released in a thread once the tasks that read them are done; a task never
makes the spill folder again once it was removed."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from gtool.preprocess import spill
from tests.support.load import scaled

ARRAYS = [
    np.arange(10, dtype=np.int64),
    np.zeros(0, dtype=np.int32),
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.arange(5, dtype=">i4"),
    np.ones(3, dtype=bool),
    np.arange(7, dtype=np.int32)[::2],
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype.str}{a.shape}")
@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip(tmp_path, array, mmap):
    path = str(tmp_path / "a.npy")
    spill.save_to(array, path)
    got = spill.load(path, mmap=mmap)
    assert got.dtype == array.dtype and got.shape == array.shape
    np.testing.assert_array_equal(got, array)
    assert got.flags.writeable is not (mmap and array.size > 0)


def test_other_headers_go_through_numpy(tmp_path):
    path = str(tmp_path / "f.npy")
    np.save(path, np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)))
    np.testing.assert_array_equal(spill.load(path), np.arange(6).reshape(2, 3))


def test_read_rows_into_reads_the_rows_into_the_buffer(tmp_path):
    rows = np.arange(15, dtype=np.float32).reshape(5, 3)
    path = str(tmp_path / "r.npy")
    spill.save_to(rows, path)
    buffer = np.full((8, 3), -1, dtype=np.float32)
    got = spill.read_rows_into(path, 1, 4, buffer)
    np.testing.assert_array_equal(got, rows[1:4])
    assert np.shares_memory(got, buffer)


def test_read_rows_into_names_a_short_or_foreign_file(tmp_path):
    path = str(tmp_path / "k.npy")
    spill.save_to(np.arange(10, dtype=np.int64), path)
    with pytest.raises(ValueError, match="rows 8-12 of 10 are not all there"):
        spill.read_rows_into(path, 8, 12, np.empty(4, dtype=np.int64))
    with pytest.raises(ValueError, match="not a spill array of int32"):
        spill.read_rows_into(path, 0, 2, np.empty(2, dtype=np.int32))
    os.truncate(path, os.path.getsize(path) - 8)
    with pytest.raises(ValueError, match=f"{path}: truncated, rows 5-10 of 10"):
        spill.read_rows_into(path, 5, 10, np.empty(5, dtype=np.int64))


@pytest.mark.parametrize("layout", ["C", "F"])
def test_rows_in_order_are_written_in_c_order_whatever_the_rows_layout(tmp_path, layout):
    rows = np.asarray(np.arange(40, dtype=np.float32).reshape(8, 5), order=layout)
    order = np.array([3, 0, 7, 1, 6, 2, 5, 4])
    path = str(tmp_path / "b.npy")
    spill.save_rows_in_order(rows, order, path, piece_bytes=3 * 20)
    np.testing.assert_array_equal(np.load(path), rows[order])
    got = spill.read_rows_into(path, 2, 6, np.empty((4, 5), dtype=np.float32))
    np.testing.assert_array_equal(got, rows[order][2:6])


def spill_dir(tmp_path) -> spill.SpillDir:
    return spill.SpillDir(None, "the output's folder", tmp_path / "out.zarr", str(tmp_path / "out.zarr"))


def sizes_become(paths: list[str], expected: list[int]) -> bool:
    """Whether the files reach these sizes within a few seconds, times the machine's load (releases run
    in a thread)."""
    deadline = time.monotonic() + scaled(10)
    while [os.path.getsize(p) for p in paths] != expected:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_release_later_frees_files_and_cleanup_waits_for_it(tmp_path):
    scratch = spill_dir(tmp_path)
    paths = [scratch.save(np.arange(1000), "runs", f"{k}.npy") for k in range(5)]
    scratch.release_later(paths[:3])
    assert sizes_become(paths, [0, 0, 0, 8128, 8128])
    scratch.cleanup()
    assert not scratch.path.exists()


def test_release_later_after_cleanup_began_leaves_files_to_the_removal(tmp_path):
    scratch = spill_dir(tmp_path)
    path = scratch.save(np.arange(10), "a.npy")
    scratch.cleanup()
    scratch.release_later([path])
    assert not scratch.path.exists()


def test_shared_reads_release_a_file_once_its_last_reader_is_done(tmp_path):
    scratch = spill_dir(tmp_path)
    a, b, c = (scratch.save(np.arange(100), f"{name}.npy") for name in "abc")
    shared = spill.SharedReads(scratch, [[a, b], [b, c], [c, c]])
    shared.done([a, b])
    shared.done([c, c])
    assert sizes_become([a, b, c], [0, 928, 928])
    shared.done([b, c])
    assert sizes_become([a, b, c], [0, 0, 0])
    scratch.cleanup()


def test_saving_again_leaves_a_reader_of_the_first_copy_its_data(tmp_path):
    path = str(tmp_path / "run.npy")
    spill.save_to(np.arange(1000), path)
    reading = spill.load(path)
    spill.save_to(np.arange(5), path)
    np.testing.assert_array_equal(reading, np.arange(1000))
    np.testing.assert_array_equal(spill.load(path), np.arange(5))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npy"]


@pytest.mark.parametrize("write", ["append", "save"])
def test_a_task_writing_after_the_spill_folder_was_removed_fails_and_makes_nothing(tmp_path, write):
    scratch = spill.SpillDir(None, "the output's folder", tmp_path / "out.zarr", "out.zarr")
    path = f"{scratch.path}/map/m0/host-1-2.bin"
    scratch.cleanup()
    with pytest.raises(FileNotFoundError) as info:
        (spill.append_to if write == "append" else spill.save_to)(np.arange(3), path)
    assert info.value.filename == str(scratch.path) and os.listdir(tmp_path) == []
    message = str(spill.vanished(info.value, "out.zarr"))
    assert message.startswith(f"{scratch.path}: the run's spill folder was removed while the run used it")
    assert message.endswith("nothing was published to out.zarr (a store that was there is unchanged)")


def test_files_outside_a_spill_folder_and_other_errors_are_not_said_to_have_vanished(tmp_path):
    spill.save_to(np.arange(3), str(tmp_path / "new" / "a.npy"))
    assert spill.vanished(FileNotFoundError(2, "gone", str(tmp_path / "edges.txt")), "o") is None
    inside = str(tmp_path / ".o.spill-0123456789" / "a.npy")
    assert spill.vanished(PermissionError(13, "denied", inside), "o") is None
