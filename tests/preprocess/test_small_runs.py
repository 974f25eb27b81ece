"""A run of a graph known to be small runs its stages in the `gtool` process, with numpy's kernels: it
starts neither a cluster nor numba; a larger one, or one that asks for workers, starts them."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gtool.preprocess.options import ShardOptions
from gtool.preprocess.pipeline import SMALL_RUN, small_run
from gtool.preprocess.resolve import resolve_source
from gtool.preprocess.sources.edgefiles import open_edge_file
from gtool.store.reader import open_store
from gtool.store.verify import verify_store
from tests.support.imports import REPORTING_GTOOL, imported


@pytest.mark.parametrize("spec", ["grid:7x9", "grid:1x5", "rmat:9:3", "sbm:300:3", "sbm-multi:200:4:3"])
def test_a_generator_counts_its_edges_without_generating_them(spec):
    source = resolve_source(spec, ShardOptions())
    assert source.edge_count() == sum(len(chunk.read()) for chunk in source.edge_chunks(1000))


def test_an_edge_array_file_counts_its_edges(tmp_path):
    np.save(tmp_path / "g.npy", np.array([[0, 1], [1, 2], [2, 0]]))
    assert open_edge_file(str(tmp_path / "g.npy")).edge_count() == 3


@pytest.mark.parametrize(
    ("spec", "options", "small"),
    [
        ("sbm:2000:4", {}, True),
        ("sbm:2000:4", {"workers": 1}, True),
        ("sbm:2000:4", {"workers": 2}, False),
        ("sbm:2000:4", {"scheduler": "tcp://127.0.0.1:8786"}, False),
        ("sbm:2000:4", {"dashboard": True}, False),
        (f"grid:1x{SMALL_RUN}", {}, True),
        (f"grid:1x{SMALL_RUN + 1}", {}, False),
        ("rmat:15:8", {}, False),
    ],
)
def test_which_runs_are_small(spec, options, small):
    assert small_run(resolve_source(spec, ShardOptions()), ShardOptions(**options)) == small


def test_an_edge_file_of_unknown_size_is_not_small(tmp_path):
    (tmp_path / "g.txt").write_text("0 1\n1 2\n")
    assert not small_run(open_edge_file(str(tmp_path / "g.txt")), ShardOptions())


@pytest.mark.integration
@pytest.mark.parametrize(("spec", "cluster"), [("sbm:2000:4", False), ("grid:400x400", True)])
def test_gtool_shard_starts_a_cluster_only_for_a_larger_graph(tmp_path, spec, cluster):
    out = tmp_path / "g.zarr"
    command = [*REPORTING_GTOOL, "shard", spec, "-o", str(out), "--tiles", "2x2", "-q"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300, check=True)
    modules = imported(done.stderr)
    assert ("distributed" in modules) == cluster
    if not cluster:
        assert "numba" not in modules
    assert verify_store(open_store(str(out))).ok
