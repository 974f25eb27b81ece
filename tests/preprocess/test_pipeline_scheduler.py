"""`--scheduler`: the same store when the work runs on an existing Dask cluster of several processes, each
with several threads (each thread appends its map tasks' entries to a file of its own)."""

from __future__ import annotations

import numpy as np
import pytest
from distributed import LocalCluster

from gtool.errors import InputError
from tests.support.stores import all_arrays, make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line


@pytest.fixture(scope="module")
def scheduler():
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_existing_cluster_gives_the_same_store(tmp_path, scheduler):
    local = all_arrays(make_store("grid:20x17", tmp_path / "a.zarr", tiles=3, seed=4))
    remote = all_arrays(make_store("grid:20x17", tmp_path / "b.zarr", tiles=3, seed=4, scheduler=scheduler))
    assert local.keys() == remote.keys()
    for name, value in local.items():
        assert value.tobytes() == remote[name].tobytes(), name


def test_input_errors_cross_process_boundaries(tmp_path, scheduler):
    edges = tmp_path / "e.txt"
    edges.write_text("0 1\n-3 2\n")
    with pytest.raises(InputError, match=r"e\.txt, line 2: negative source node id -3"):
        make_store(str(edges), tmp_path / "s.zarr", tiles=2, scheduler=scheduler)


def test_many_chunks_mapped_by_threads_side_by_side_give_the_same_store(tmp_path, scheduler):
    rng = np.random.default_rng(5)
    edges = tmp_path / "edges.npy"
    np.save(edges, rng.integers(0, 3001, size=(2, 40_000)))
    options = {"tiles": 3, "seed": 2, "chunk_edges": 1500}
    local = all_arrays(make_store(str(edges), tmp_path / "a.zarr", **options))
    remote = all_arrays(make_store(str(edges), tmp_path / "b.zarr", scheduler=scheduler, **options))
    for name, value in local.items():
        assert value.tobytes() == remote[name].tobytes(), name
