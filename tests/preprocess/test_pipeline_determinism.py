"""The same input and seed give byte-identical arrays whatever the worker count or chunk size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from gtool.preprocess import kernels
from tests.support.stores import all_arrays, make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line


def test_workers_and_chunk_sizes_do_not_change_the_store(tmp_path):
    """1 worker (a thread of this process), 2 and 3 (worker processes), different chunk sizes: the same
    arrays byte for byte, A1 (written as A0 transposed) included."""
    source = "grid:40x37"
    a = make_store(source, tmp_path / "a.zarr", tiles=5, seed=3, workers=1)
    b = make_store(source, tmp_path / "b.zarr", tiles=5, seed=3, workers=2, chunk_edges=97)
    c = make_store(source, tmp_path / "c.zarr", tiles=5, seed=3, workers=3, chunk_edges=1000)
    arrays_a, arrays_b, arrays_c = all_arrays(a), all_arrays(b), all_arrays(c)
    assert len(arrays_a) > 5 * 5 * 3 * 2
    assert arrays_a.keys() == arrays_b.keys() == arrays_c.keys()
    for name, value in arrays_a.items():
        assert value.dtype == arrays_b[name].dtype
        assert value.tobytes() == arrays_b[name].tobytes(), name
        assert value.tobytes() == arrays_c[name].tobytes(), name
    meta = [zarr.open_group(p).attrs["gtool"] for p in (a, b, c)]
    for m in meta:
        m.pop("created_at")
    assert meta[0] == meta[1] == meta[2]
    assert stored_files(a) == stored_files(b) == stored_files(c)


@pytest.mark.parametrize(
    ("source", "options"),
    [
        ("rmat:11:8", {"perm": "balanced"}),
        ("sbm:3000:4", {"directed": True}),
        ("grid:30x41", {"norm": "none", "perm": "single"}),
    ],
)
def test_numpys_kernels_alone_and_numbas_on_a_cluster_write_the_same_files(tmp_path, source, options):
    """A small run (numpy's kernels, this process alone) and the same run on two forked Dask workers that
    take numba's kernels (forced before they fork) write the same files."""
    alone = make_store(source, tmp_path / "a.zarr", tiles=3, **options)
    with kernels.forced(True):
        cluster = make_store(source, tmp_path / "b.zarr", tiles=3, workers=2, chunk_edges=5000, **options)
    assert stored_files(alone) == stored_files(cluster)


def stored_files(path: str) -> dict[str, bytes]:
    """Every file of a store as written (encoded chunks, array metadata), but the root's attributes."""
    root = Path(path)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p != root / "zarr.json"
    }


def test_seed_changes_permutation(tmp_path):
    a = make_store("grid:10x10", tmp_path / "a.zarr", tiles=2, seed=1)
    b = make_store("grid:10x10", tmp_path / "b.zarr", tiles=2, seed=2)
    assert not np.array_equal(zarr.open_array(a, path="perm/r")[:], zarr.open_array(b, path="perm/r")[:])
