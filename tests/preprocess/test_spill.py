"""Spill arrays read back exactly as np.save wrote them, memory-mapped read-only or in memory."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess import spill

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
