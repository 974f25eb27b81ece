"""`--scheduler`: the same store when the work runs on an existing multi-process Dask cluster."""

from __future__ import annotations

import pytest
from distributed import LocalCluster

from gtool.errors import InputError
from tests.support.stores import all_arrays, make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line


@pytest.fixture(scope="module")
def scheduler():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
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
