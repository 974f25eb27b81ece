"""Every node-property dataset of ogb's master.csv, laid out at tiny size as ogb lays it out: sharded, or
refused with the reason (heterogeneous ogbn-mag), by name and by path."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import GtoolError, InputError
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.resolve import resolve_source
from gtool.preprocess.sources.ogb.csvfiles import read_csv_column
from gtool.preprocess.sources.ogb.layout import known_dataset, master_rows
from gtool.preprocess.sources.ogb.source import OgbSource, open_ogb
from tests.preprocess.sources.ogb.test_ogb import (
    N,
    check_contents,
    expected_split,
    ogb_module,
    toy_graph,
    write_binary,
    write_csv_form,
    write_csv_gz,
    write_split,
)

REASONS = {"ogbn-mag": "a heterogeneous graph"}


def master_entry(name: str) -> dict[str, str]:
    rows = master_rows()
    column = rows[""].index(name)
    return {field: values[column] for field, values in rows.items()}


def write_hetero(folder: Path) -> None:
    """ogbn-mag's CSV raw form at tiny size: typed nodes and relations, features of papers only."""
    raw = folder / "raw"
    write_csv_gz(raw / "triplet-type-list.csv.gz", np.array([["author", "writes", "paper"]]))
    write_csv_gz(raw / "num-node-dict.csv.gz", np.array([["author", "paper"], [N, N]]))
    edges = toy_graph()[0]
    write_csv_gz(raw / "relations" / "author___writes___paper" / "edge.csv.gz", edges.T)
    write_csv_gz(raw / "relations" / "author___writes___paper" / "num-edge-list.csv.gz", [[edges.shape[1]]])
    write_csv_gz(raw / "node-feat" / "paper" / "node-feat.csv.gz", toy_graph()[1])
    write_split(folder, "time")


def task_labels(tasks: int) -> np.ndarray:
    """N x `tasks` binary task labels, as ogbn-proteins has them."""
    return np.random.default_rng(1).integers(0, 2, (N, tasks))


def edge_features() -> np.ndarray:
    """E x 8 edge features in [0, 1), as ogbn-proteins has them."""
    return np.random.default_rng(2).random((toy_graph()[0].shape[1], 8)).round(3)


def edge_means(edges: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Each node's mean of the features of its incident edges (both ends of every edge), zeros for none."""
    sums, counts = np.zeros((N, features.shape[1])), np.zeros(N)
    for ends in edges:
        np.add.at(sums, ends, features)
        np.add.at(counts, ends, 1)
    return sums / np.maximum(counts, 1)[:, None]


def write_like_master(name: str, folder: Path) -> None:
    """A tiny dataset in the raw form, tasks, node and edge features and split that master.csv gives."""
    entry = master_entry(name)
    if entry["is hetero"] == "True":
        write_hetero(folder)
        return
    if entry["binary"] == "True":
        write_binary(folder, compressed=True)
        return
    write_csv_form(folder)
    raw = folder / "raw"
    tasks = int(entry["num tasks"])
    if tasks > 1:
        write_csv_gz(raw / "node-label.csv.gz", task_labels(tasks))
    if entry["has_node_attr"] != "True":
        (raw / "node-feat.csv.gz").unlink()
    if entry["has_edge_attr"] == "True":
        write_csv_gz(raw / "edge-feat.csv.gz", edge_features())
    if entry["split"] != "time":
        (folder / "split" / "time").rename(folder / "split" / entry["split"])


@pytest.mark.parametrize("name", master_rows()[""])
def test_every_master_dataset_is_sharded_or_refused(tmp_path: Path, name: str) -> None:
    info = known_dataset(name)
    assert info is not None and info.name == name
    write_like_master(name, tmp_path / info.dir_name)
    if name in REASONS:
        for spec in (name, str(tmp_path / info.dir_name)):
            with pytest.raises(InputError, match=re.escape(f"not supported: it is {REASONS[name]}")):
                open_ogb(spec, str(tmp_path))
        return
    source = open_ogb(str(tmp_path / info.dir_name))
    assert source.directed == (master_entry(name)["add_inverse_edge"] != "True")
    if info.num_tasks > 1:
        check_proteins(source, tmp_path / "work", info.num_tasks)
        return
    nan_labels = info.binary
    check_contents(source, tmp_path / "work", num_classes=info.num_classes, labels_nan=nan_labels)


def check_proteins(source: OgbSource, workdir: Path, tasks: int) -> None:
    """ogbn-proteins' CSV form: N x K task labels, node features the means of the edge features, the
    species split."""
    source.prepare(str(workdir))
    data = source.node_data()
    assert data.labels is not None and data.labels.dtype == np.int64
    np.testing.assert_array_equal(data.labels, task_labels(tasks))
    assert data.features is not None and data.features.num_features == 8
    want = edge_means(toy_graph()[0], edge_features())
    np.testing.assert_allclose(data.features.read_rows(np.arange(N)), want, rtol=1e-6)
    np.testing.assert_allclose(data.features.read_block(3, 9), want[3:9], rtol=1e-6)
    assert data.split is not None and np.array_equal(data.split, expected_split())
    assert source.describe()["num_tasks"] == tasks


def test_proteins_layout_under_another_name_is_known_by_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "my-proteins"
    write_like_master("ogbn-proteins", folder)
    source = open_ogb(str(folder))
    assert source.dataset.info.num_tasks == 112 and source.dataset.info.task_type == "binary classification"
    check_proteins(source, tmp_path / "work", 112)


def test_mag_by_name_and_path_names_the_reason_without_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ogb_module("ogb.utils.url"), "download_url", pytest.fail)
    write_hetero(tmp_path / "unzipped" / "mag")
    write_hetero(tmp_path / "renamed")
    specs = ["ogbn-mag", "mag", "OGBN_MAG", str(tmp_path / "unzipped" / "mag"), str(tmp_path / "renamed")]
    for spec in specs:
        args = ["shard", spec, "--root", str(tmp_path / "root"), "-o", str(tmp_path / "s.zarr"), "-q"]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert result.exit_code == 2, spec
        assert "not supported: it is a heterogeneous graph" in result.output, result.output
    assert not (tmp_path / "root").exists() and not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("spec", ["ogbn-papers100M", "papers100M", "papers100m", "ogbn_papers100m"])
def test_name_forms(spec: str) -> None:
    info = known_dataset(spec)
    assert info is not None and info.name == "ogbn-papers100M" and info.refusal() is None


def test_a_mistyped_name_gets_the_nearest_and_an_empty_source_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    expected = {
        "papers100": "(did you mean papers100m?)",
        "ogbn_Prodcts": "(did you mean products?)",
        "pubmd": "(did you mean pubmed?)",
        "xyz": "xyz: no such file or directory, and not a source name; SOURCE is",
        "cora.txt": "cora.txt: no such file or directory, and not a source name; SOURCE is",
        "": "SOURCE is empty ('': an unset variable?); SOURCE is an edge file",
    }
    for spec, message in expected.items():
        with pytest.raises(GtoolError, match=re.escape(message)):
            resolve_source(spec, ShardOptions())


def test_existing_folder_wins_over_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_binary(tmp_path / "ogbn_papers100M", compressed=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ogb_module("ogb.utils.url"), "download_url", pytest.fail)
    assert open_ogb("ogbn_papers100M", str(tmp_path / "elsewhere")).num_nodes() == N


def test_one_value_per_line_files_refuse_more_columns(tmp_path: Path) -> None:
    write_csv_gz(tmp_path / "node-label.csv.gz", np.zeros((4, 3), dtype=int))
    with pytest.raises(InputError, match=r"line 1: expected one value per line, found 3 comma-separated"):
        read_csv_column(str(tmp_path / "node-label.csv.gz"), integer=True)


def test_proteins_means_follow_the_edges_and_bad_values_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "ogbn_proteins"
    write_like_master("ogbn-proteins", folder)
    check_proteins(open_ogb(str(folder)), tmp_path / "work", 112)
    edges = toy_graph()[0][::-1].copy()  # the same edges the other way round, in another order
    edges[:, :3] = edges[:, 3:6]
    write_csv_gz(folder / "raw" / "edge.csv.gz", edges.T)
    source = open_ogb(str(folder))
    source.prepare(str(tmp_path / "work"))
    features = source.node_data().features
    assert features is not None
    np.testing.assert_allclose(
        features.read_rows(np.arange(N)), edge_means(edges, edge_features()), rtol=1e-6
    )
    bad_labels = task_labels(112)
    bad_labels[5, 7] = 2
    write_csv_gz(folder / "raw" / "node-label.csv.gz", bad_labels)
    with pytest.raises(InputError, match=r"node-label.csv.gz, line 6, column 8: task label 2 is not 0 or 1"):
        open_ogb(str(folder)).node_data()
    bad_features = edge_features()
    bad_features[9, 2] = np.nan
    write_csv_gz(folder / "raw" / "edge-feat.csv.gz", bad_features)
    with pytest.raises(InputError, match=r"edge-feat.csv.gz, line 10: missing value"):
        open_ogb(str(folder)).prepare(str(tmp_path / "other"))
