"""`gtool shard` and `gtool info` run the way a user runs them, on real files."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gtool.preprocess.sources.planetoid.source import open_planetoid
from gtool.store import layout
from gtool.store.reader import open_store
from tests.support.reference import (
    assert_same_sparse,
    normalized_adjacency,
    permuted,
    reassemble,
    source_edges,
)

pytestmark = pytest.mark.integration  # builds stores / runs the command line


def gtool(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gtool.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_shard_cora_end_to_end(tmp_path, cora_dir):
    out = tmp_path / "cora.zarr"
    run = gtool("shard", str(cora_dir), "--tiles", "3x3", "-o", str(out), "--seed", "5")
    assert run.returncode == 0, run.stderr
    assert "nonzeros" in run.stdout and "2,708" in run.stdout  # the summary: stdout; progress: stderr
    store = open_store(str(out))
    assert (store.num_nodes, store.num_features, store.num_classes) == (2708, 1433, 7)
    source = open_planetoid(str(cora_dir))
    src, dst = source_edges(source)
    adj = normalized_adjacency(src, dst, 2708)
    assert adj.nnz == 2 * 5278 + 2708
    assert_same_sparse(reassemble(store, 0), permuted(adj, store.perm("r"), store.perm("c")))
    split_c = store.array(layout.SPLIT["c"])[:]
    assert np.bincount(split_c[split_c >= 0]).tolist() == [140, 500, 1000]
    info = gtool("info", str(out), "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["complete"] is True


def test_bad_edge_file_names_file_and_line(tmp_path):
    edges = tmp_path / "edges.txt"
    edges.write_text("# a comment\n0 1\n1 2\n2 x\n")
    run = gtool("shard", str(edges), "-o", str(tmp_path / "s.zarr"), "--tiles", "2x2", "-q")
    assert run.returncode == 2
    assert "edges.txt" in run.stderr and "line 4" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "s.zarr").exists()


def test_id_beyond_declared_node_count(tmp_path):
    edges = tmp_path / "edges.csv"
    edges.write_text("0,1\n1,7\n")
    run = gtool(
        "shard", str(edges), "--num-nodes", "5", "-o", str(tmp_path / "s.zarr"), "--tiles", "2x2", "-q"
    )
    assert run.returncode == 2
    assert (
        "edges.csv" in run.stderr and "line 2" in run.stderr and ">= the declared node count 5" in run.stderr
    )


def test_unknown_source_and_bad_tiles(tmp_path):
    run = gtool("shard", str(tmp_path / "nope.txt"), "-q")
    assert run.returncode == 2 and "no such file" in run.stderr
    run = gtool("shard", "grid:3x3", "--tiles", "2x3", "-q")
    assert run.returncode == 2 and "square" in run.stderr


def test_feature_rows_must_match_nodes(tmp_path):
    features = tmp_path / "x.npy"
    np.save(features, np.ones((7, 3), dtype=np.float32))
    run = gtool("shard", "grid:3x3", "--features", str(features), "-o", str(tmp_path / "s.zarr"), "-q")
    assert run.returncode == 2
    assert "x.npy" in run.stderr and "7 feature rows, expected one per node (9)" in run.stderr
