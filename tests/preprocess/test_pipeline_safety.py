"""Staging, overwriting, interrupted runs, and what readers refuse."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import zarr

from gtool.errors import GtoolError, InputError, StoreError, StoreExistsError
from gtool.preprocess import pipeline
from gtool.preprocess.edges import reducer
from gtool.preprocess.edges.mapper import map_chunk
from gtool.store.reader import open_store
from tests.support.shard_runs import leftovers
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line


def test_existing_store_needs_overwrite(tmp_path):
    path = make_store("grid:4x4", tmp_path / "s.zarr", tiles=2)
    with pytest.raises(StoreExistsError, match="--overwrite"):
        make_store("grid:5x5", tmp_path / "s.zarr", tiles=2)
    assert open_store(path).num_nodes == 16
    make_store("grid:5x5", tmp_path / "s.zarr", tiles=2, overwrite=True)
    assert open_store(path).num_nodes == 25
    assert leftovers(tmp_path) == []


def test_failed_run_publishes_nothing_and_keeps_the_old_store(tmp_path, monkeypatch):
    path = make_store("grid:4x4", tmp_path / "s.zarr", tiles=2)

    def broken(batch, plan):
        raise OSError("disk full")

    monkeypatch.setattr(reducer, "write_tiles", broken)
    monkeypatch.setattr("gtool.preprocess.pipeline.write_tiles", broken)
    with pytest.raises(OSError, match="disk full"):
        make_store("grid:6x6", tmp_path / "s.zarr", tiles=2, overwrite=True)
    assert open_store(path).num_nodes == 16
    assert leftovers(tmp_path) == []


def test_a_spill_folder_removed_during_the_run_is_one_error_and_nothing_is_left(tmp_path, monkeypatch):
    def removing_the_spill_folder(item, job):
        shutil.rmtree(job.spill_root, ignore_errors=True)
        return map_chunk(item, job)

    monkeypatch.setattr(pipeline, "map_chunk", removing_the_spill_folder)
    with pytest.raises(GtoolError, match=r"spill folder( \(or .* in it\))? was removed while the run"):
        make_store("grid:6x6", tmp_path / "s.zarr", tiles=2)
    assert leftovers(tmp_path) == []


def test_a_failure_after_publishing_keeps_the_published_store(tmp_path, monkeypatch):
    """The store is renamed into place as soon as it is complete, before the cluster closes (so a kill
    has no time to leave a complete-looking .NAME.partial), and an error while closing keeps it."""
    from gtool.preprocess import pipeline

    class ClosingFails:
        def __init__(self, *args):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            if exc[0] is None:
                assert (tmp_path / "s.zarr" / "zarr.json").exists()
                raise RuntimeError("cluster did not close")

    monkeypatch.setattr(pipeline, "HighWater", ClosingFails)
    with pytest.raises(RuntimeError, match="cluster did not close"):
        make_store("grid:4x4", tmp_path / "s.zarr", tiles=2)
    assert open_store(str(tmp_path / "s.zarr")).num_nodes == 16


def test_killed_run_leaves_nothing_complete_and_rerun_works(tmp_path):
    out = tmp_path / "s.zarr"
    cmd = [
        sys.executable,
        "-m",
        "gtool.cli",
        "shard",
        "rmat:18:8",
        "-o",
        str(out),
        "--tiles",
        "8x8",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    partial = tmp_path / ".s.zarr.partial"
    deadline = time.time() + 60
    while not (partial / "adj").exists() and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    with pytest.raises(StoreError, match="incomplete"):
        open_store(str(partial))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    assert open_store(str(out)).num_nodes == 1 << 18
    assert leftovers(tmp_path) == []


def test_reader_refuses_incomplete_and_unknown_layouts(tmp_path):
    path = make_store("grid:4x4", tmp_path / "s.zarr", tiles=2)
    group = zarr.open_group(path, mode="r+")
    meta = dict(group.attrs["gtool"])
    group.attrs["gtool"] = {**meta, "layout": 99}
    with pytest.raises(StoreError, match="unknown store layout 99"):
        open_store(path)
    group.attrs["gtool"] = {**meta, "complete": False}
    with pytest.raises(StoreError, match="incomplete"):
        open_store(path)
    group.attrs["gtool"] = {**meta, "num_nodes": 17}
    with pytest.raises(StoreError, match="perm/r has shape"):
        open_store(path)
    group.attrs["gtool"] = {**meta, "tile_size": 3}
    with pytest.raises(StoreError, match=r"tile_size 3 does not match ceil\(N / T\) = 8"):
        open_store(path)
    with pytest.raises(StoreError, match="not a gtool store"):
        open_store(str(tmp_path / "missing.zarr"))


def test_empty_graph_is_refused(tmp_path):
    import numpy as np

    edges = tmp_path / "empty.npy"
    np.save(edges, np.zeros((2, 0), dtype=np.int64))
    with pytest.raises(InputError, match="empty graph"):
        make_store(str(edges), tmp_path / "s.zarr", tiles=2, num_nodes=5)
    assert not (tmp_path / "s.zarr").exists()


def test_too_small_memory_limit_is_explained(tmp_path):
    from gtool.errors import GtoolError

    with pytest.raises(GtoolError, match="too small for 1,024 nodes with 1 workers: give at least"):
        make_store("rmat:10", tmp_path / "s.zarr", tiles=2, memory_limit=100 << 20)


def test_memory_limit_bounds_the_whole_process_tree(tmp_path):
    """Peak RSS of the whole `gtool shard` process tree (the parent and its two worker processes, about
    100 MB of interpreter each), measured by ../shared/tools/peakmem."""
    import json

    from tests.support.paths import SHARED, absent

    peakmem = SHARED / "tools" / "peakmem"
    if not peakmem.exists():
        pytest.skip(absent(peakmem))
    figures = tmp_path / "peak.json"
    limit_mb = 720
    cmd = [sys.executable, str(peakmem), "--json", str(figures), "--", sys.executable, "-m", "gtool.cli"]
    cmd += ["shard", "rmat:19:8", "--tiles", "8x8", "-o", str(tmp_path / "s.zarr"), "-q"]
    cmd += ["--memory-limit", f"{limit_mb}MB", "--workers", "2"]
    subprocess.run(cmd, check=True, capture_output=True)
    assert json.loads(figures.read_text())["peak_rss_mb"] <= limit_mb


@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_store_at_an_fsspec_url(tmp_path, scheme):
    """file:// URLs are staged like paths; other URLs (here in-memory) are written in place."""
    from gtool.preprocess.sources.generators import parse_generator
    from tests.support.reference import (
        assert_same_sparse,
        normalized_adjacency,
        permuted,
        reassemble,
        source_edges,
    )

    url = f"file://{tmp_path}/s.zarr" if scheme == "file" else f"memory://{tmp_path.name}/s.zarr"
    make_store("grid:6x5", url, tiles=3, seed=2)
    store = open_store(url)
    adj = normalized_adjacency(*source_edges(parse_generator("grid:6x5")), 30)
    assert_same_sparse(reassemble(store, 0), permuted(adj, store.perm("r"), store.perm("c")))
    with pytest.raises(StoreExistsError):
        make_store("grid:6x5", url, tiles=3)
