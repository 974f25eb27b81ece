"""ogbn-proteins as a user shards it: a folder written by ogb's DatasetSaver becomes a store of N x K task
labels (-1 unknown), node features that are the means of the edge features, and the species split; an
undirected OGB dataset is refused with --directed, whose stored direction would drop half of every edge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gtool
from gtool.cli.main import app
from tests.preprocess.sources.ogb.test_ogb import (
    SPLIT,
    N,
    expected_split,
    ogb_module,
    toy_graph,
)
from tests.preprocess.sources.ogb.test_ogb_master import edge_means, write_like_master

pytestmark = pytest.mark.integration  # runs gtool shard

TASKS = 112
SHARD = ["--tiles", "2x2", "-q", "-w", "1"]


def save_proteins(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """ogbn-proteins at tiny size written by DatasetSaver (binary form: edge_feat in data.npz, N x 112
    node_label with NaN for unknown, split_dict.pt); its folder, labels and edge features."""
    saver_module = ogb_module("ogb.io.save_dataset")
    rng = np.random.default_rng(3)
    edges = toy_graph()[0]
    features = rng.random((edges.shape[1], 8)).astype(np.float32)
    labels = rng.integers(0, 2, (N, TASKS)).astype(np.float64)
    labels[rng.random((N, TASKS)) < 0.05] = np.nan
    species = rng.integers(0, 8, (N, 1))
    saver = saver_module.DatasetSaver("ogbn-proteins", is_hetero=False, version=1, root=str(tmp_path / "sub"))
    saver.save_graph_list(
        [{"edge_index": edges, "num_nodes": N, "edge_feat": features, "node_species": species}]
    )
    saver.save_task_info("binary classification", "rocauc", num_classes=2)
    saver.save_target_labels(labels)
    saver.save_split(SPLIT, "species")
    (tmp_path / "mapping").mkdir()
    (tmp_path / "mapping" / "README.md").write_text("proteins at tiny size\n")
    saver.copy_mapping_dir(str(tmp_path / "mapping"))
    saver.get_meta_dict()
    return tmp_path / "sub_ogbn_proteins", labels, features


def test_a_datasetsaver_proteins_folder_shards_to_multi_label_labels_and_mean_edge_features(
    tmp_path: Path,
) -> None:
    folder, labels, features = save_proteins(tmp_path)
    out = tmp_path / "proteins.zarr"
    result = CliRunner().invoke(app, ["shard", str(folder), "-o", str(out), *SHARD])
    assert result.exit_code == 0, result.output
    store = gtool.open_store(out)
    assert store.num_classes == TASKS and store.meta.labels.kind == f"multi-label 0/1 int64[N, {TASKS}]"
    assert store.meta.source["num_tasks"] == TASKS
    stored = gtool.labels(store)
    assert stored.shape == (N, TASKS) and stored.dtype == np.int64
    np.testing.assert_array_equal(stored, np.where(np.isnan(labels), -1, labels))
    assert (stored == -1).any()
    np.testing.assert_allclose(gtool.features(store), edge_means(toy_graph()[0], features), rtol=1e-6)
    np.testing.assert_array_equal(gtool.split(store), expected_split())
    assert gtool.verify_store(store).ok


@pytest.mark.parametrize("name", ["ogbn-products", "ogbn-proteins"])
def test_directed_is_refused_for_an_undirected_ogb_dataset(tmp_path: Path, name: str) -> None:
    """ogbn-products with --directed kept 282 of its 556 edges: OGB stores each undirected edge once."""
    root = tmp_path / "root"
    folder = root / name.replace("-", "_")
    write_like_master(name, folder)
    for spec in (name, str(folder)):
        out = tmp_path / "s.zarr"
        args = ["shard", spec, "--root", str(root), "--directed", "-o", str(out), *SHARD]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
        assert result.exit_code == 2, result.output
        where = spec if spec == name else str(folder)
        assert result.output.startswith(
            f"error: {where}: --directed keeps each edge's direction, but this dataset is undirected: OGB "
            "stores each edge once and adds its inverse when loading it"
        ), result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    result = CliRunner().invoke(
        app, ["shard", name, "--root", str(root), "-o", str(tmp_path / "u.zarr"), *SHARD]
    )
    assert result.exit_code == 0, result.output
    stored = gtool.open_store(tmp_path / "u.zarr")
    assert stored.meta.graph == "symmetrized" and stored.meta.source["directed"] is False
    edges = toy_graph()[0]
    links = {(u, v) for u, v in zip(*edges.tolist(), strict=True) if u != v}
    assert stored.meta.source["input_edges"] == edges.shape[1]
    assert stored.meta.nnz[0] == len(links | {(v, u) for u, v in links}) + N  # both directions, a loop each
