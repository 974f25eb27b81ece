"""Every node-property dataset of ogb's master.csv, laid out at tiny size as ogb lays it out: sharded, or
refused with the reason (heterogeneous ogbn-mag, multi-label ogbn-proteins), by name and by path."""

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
from gtool.preprocess.sources.ogb.source import open_ogb
from tests.preprocess.sources.ogb.test_ogb import (
    N,
    check_contents,
    ogb_module,
    toy_graph,
    write_binary,
    write_csv_form,
    write_csv_gz,
    write_split,
)

REASONS = {"ogbn-mag": "a heterogeneous graph", "ogbn-proteins": "multi-label (112 binary classification"}


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
        write_csv_gz(raw / "node-label.csv.gz", np.random.default_rng(1).integers(0, 2, (N, tasks)))
    if entry["has_node_attr"] != "True":
        (raw / "node-feat.csv.gz").unlink()
    if entry["has_edge_attr"] == "True":
        write_csv_gz(raw / "edge-feat.csv.gz", np.ones((toy_graph()[0].shape[1], 8)))
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
    nan_labels = info.binary
    check_contents(source, tmp_path / "work", num_classes=info.num_classes, labels_nan=nan_labels)


def test_proteins_layout_under_another_name_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "my-proteins"
    write_like_master("ogbn-proteins", folder)
    with pytest.raises(InputError, match=r"my-proteins: not supported: it is multi-label \(112 binary"):
        open_ogb(str(folder))
    result = CliRunner().invoke(app, ["shard", str(folder), "-q"], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "multi-label" in result.output and "no multi-label loss" in result.output
    assert not list(tmp_path.glob("*.zarr"))


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
    for spec in ("ogbn-proteins", "proteins"):
        result = CliRunner().invoke(app, ["shard", spec, "--root", str(tmp_path / "root"), "-q"])
        assert result.exit_code == 2 and f"{spec}: not supported: it is multi-label" in result.output


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
