"""Input values refused once `gtool shard` has started its cluster, before they are planned or stored:
non-finite features of an OGB dataset, a feature width no chunk or task can hold, features without columns,
one stray label (before the edges are mapped), labels that int64 cannot hold."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.preprocess import pipeline

pytestmark = pytest.mark.integration  # starts the pipeline's (one-worker) cluster

N = 20


def refused(tmp_path: Path, *args: str) -> str:
    """The one error line of a refused `gtool shard ... -o tmp/s.zarr`; checks that nothing is left."""
    out = tmp_path / "s.zarr"
    result = CliRunner().invoke(
        app, ["shard", *args, "-o", str(out), "-q", "-w", "1"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 2, result.output
    assert not out.exists() and not list(tmp_path.glob(".s.zarr*"))
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def ring() -> sp.csr_matrix:
    return sp.csr_matrix(sp.eye(N, k=1) + sp.eye(N, k=1 - N))


def benchmark_graph(path: Path, attr_shape: tuple[int, int], labels: np.ndarray) -> Path:
    """A GNN-benchmark .npz of a ring of N nodes with one feature per node."""
    adj, attr = ring(), sp.csr_matrix(np.eye(N, 4, dtype=np.float32))
    np.savez(
        path,
        adj_data=adj.data,
        adj_indices=adj.indices,
        adj_indptr=adj.indptr,
        adj_shape=np.array(adj.shape),
        attr_data=attr.data,
        attr_indices=attr.indices,
        attr_indptr=attr.indptr,
        attr_shape=np.array(attr_shape),
        labels=labels,
    )
    return path


def test_ogb_non_finite_feature(tmp_path: Path) -> None:
    raw = tmp_path / "ogbn_papers100M" / "raw"
    raw.mkdir(parents=True)
    edges = np.stack([np.arange(N), (np.arange(N) + 1) % N])
    features = np.ones((N, 3), np.float32)
    features[11, 1] = -np.inf
    counts = {"num_nodes_list": np.array([N]), "num_edges_list": np.array([N])}
    np.savez(raw / "data.npz", edge_index=edges, node_feat=features, **counts)
    np.savez(raw / "node-label.npz", node_label=np.zeros((N, 1), np.float32))
    split = tmp_path / "ogbn_papers100M" / "split" / "time"
    split.mkdir(parents=True)
    for name, ids in (("train", b"0\n1\n"), ("valid", b"2\n"), ("test", b"3\n")):
        (split / f"{name}.csv.gz").write_bytes(gzip.compress(ids))
    line = refused(tmp_path, str(tmp_path / "ogbn_papers100M"), "--tiles", "2x2")
    assert f"{raw / 'data.npz'}[node_feat], row 11, column 1: feature -inf is not a finite float32" in line


def test_feature_width_no_chunk_holds_refused_before_planning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("feature writes planned")

    monkeypatch.setattr(pipeline, "feature_tasks", never)
    graph = benchmark_graph(tmp_path / "g.npz", (N, 10**9), np.arange(N) % 4)
    line = refused(tmp_path, str(graph), "--tiles", "2x2")
    assert f"{graph}[attr_data]: 1,000,000,000 features per node: a row of float32 is more than" in line
    graph = benchmark_graph(tmp_path / "g.npz", (N, 10**7), np.arange(N) % 4)
    line = refused(tmp_path, str(graph), "--tiles", "2x2", "--memory-limit", "330MB")
    assert "10,000,000 features per node: writing one row takes about 114.4 MiB, more than the" in line


def test_features_without_columns(tmp_path: Path) -> None:
    np.save(tmp_path / "x0.npy", np.zeros((N, 0), np.float32))
    np.savez_compressed(tmp_path / "x0.npz", x=np.zeros((N, 0), np.float32))
    graph = benchmark_graph(tmp_path / "g.npz", (N, 0), np.arange(N) % 4)
    for where, args in (
        (f"{tmp_path / 'x0.npy'}", ["grid:4x5", "--features", str(tmp_path / "x0.npy")]),
        (f"{tmp_path / 'x0.npz'}[x]", ["grid:4x5", "--features", str(tmp_path / "x0.npz")]),
        (f"{graph}[attr_data]", [str(graph)]),
    ):
        line = refused(tmp_path, *args, "--tiles", "2x2")
        assert f"error: {where}: 0 features per node: expected at least one feature column" in line


def edges_never_mapped(*args, **kwargs):
    raise AssertionError("the edges were mapped before the labels were checked")


def test_one_stray_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline.ShardRun, "map_stage", edges_never_mapped)
    labels = np.arange(N) % 4
    labels[7] = 10**9
    graph = benchmark_graph(tmp_path / "g.npz", (N, 4), labels)
    line = refused(tmp_path, str(graph), "--tiles", "2x2")
    assert "error: g.npz: the largest label, 1,000,000,000, would make 1,000,000,001 classes" in line
    assert "give the class count with --num-classes" in line
    np.save(tmp_path / "y.npy", labels)
    line = refused(tmp_path, "grid:4x5", "--tiles", "2x2", "--labels", str(tmp_path / "y.npy"))
    assert "would make 1,000,000,001 classes" in line
    line = refused(
        tmp_path, "grid:4x5", "--tiles", "2x2", "--labels", str(tmp_path / "y.npy"), "--num-classes", "4"
    )
    assert f"{tmp_path / 'y.npy'}, node 7: label 1000000000 is >= the 4 classes --num-classes gives" in line


@pytest.mark.parametrize(
    ("dtype", "value", "shown"),
    [
        (np.uint64, 2**64 - 1, "18446744073709551615"),
        (np.uint64, 2**63, "9223372036854775808"),
        (np.float64, 1e30, "1e+30"),
    ],
)
def test_labels_and_splits_int64_cannot_hold(tmp_path: Path, dtype: type, value: float, shown: str) -> None:
    values = (np.arange(N) % 3).astype(dtype)
    values[5] = value
    np.save(tmp_path / "v.npy", values)
    for option, what in (("--labels", "label"), ("--split", "split code")):
        line = refused(tmp_path, "grid:4x5", "--tiles", "2x2", option, str(tmp_path / "v.npy"))
        assert f"v.npy, array[5]: expected an integer {what} below 2^63" in line and shown in line, line
