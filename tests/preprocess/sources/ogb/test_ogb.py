"""OGB sources: DatasetSaver folders, OGB's layout under ROOT in both raw forms, fetching, bad inputs."""

from __future__ import annotations

import importlib
import os
import pickle
import re
import shutil
import sys
import urllib.error
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
import torch

from gtool.errors import InputError
from gtool.preprocess.sources.base import check_edge_ids
from gtool.preprocess.sources.cache.entries import list_entries
from gtool.preprocess.sources.generators import RmatSource
from gtool.preprocess.sources.ogb.layout import known_dataset, known_folder
from gtool.preprocess.sources.ogb.source import OgbSource, open_ogb

N = 64
SPLIT = {"train": np.arange(0, 30), "valid": np.arange(30, 40), "test": np.arange(40, 50)}


def ogb_module(name: str) -> ModuleType:
    """Import an ogb module without ogb's import-time PyPI version check: tests never touch the network."""
    sys.modules.setdefault("outdated", None)  # type: ignore[arg-type]
    return importlib.import_module(name)


def toy_graph() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(2 x E edges, N x 5 float32 features, N float labels with two NaN) of a small R-MAT graph."""
    block = RmatSource(6, 4).edge_chunks(1 << 20)[0].read()
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 4, N).astype(np.float64)
    labels[[3, 9]] = np.nan
    return np.stack([block.src, block.dst]), rng.random((N, 5), dtype=np.float32), labels


def expected_split() -> np.ndarray:
    codes = np.full(N, -1, dtype=np.int8)
    for code, ids in enumerate(SPLIT.values()):
        codes[ids] = code
    return codes


def write_csv_gz(path: Path, values: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(values).to_csv(path, header=False, index=False, compression="gzip")


def write_split(folder: Path, name: str) -> None:
    for part, ids in SPLIT.items():
        write_csv_gz(folder / "split" / name / f"{part}.csv.gz", ids[:, None])


def write_binary(folder: Path, compressed: bool) -> None:
    """OGB's binary raw form (papers100M): raw/data.npz, raw/node-label.npz, split/time/*.csv.gz."""
    edges, features, labels = toy_graph()
    save = np.savez_compressed if compressed else np.savez
    (folder / "raw").mkdir(parents=True)
    save(
        folder / "raw" / "data.npz",
        edge_index=edges,
        node_feat=features,
        num_nodes_list=np.array([N]),
        num_edges_list=np.array([edges.shape[1]]),
    )
    save(folder / "raw" / "node-label.npz", node_label=labels[:, None].astype(np.float32))
    write_split(folder, "time")


def write_csv_form(folder: Path) -> None:
    """OGB's CSV raw form (arxiv/products), labels without NaN."""
    edges, features, labels = toy_graph()
    raw = folder / "raw"
    write_csv_gz(raw / "edge.csv.gz", edges.T)
    write_csv_gz(raw / "node-feat.csv.gz", features)
    write_csv_gz(raw / "node-label.csv.gz", np.nan_to_num(labels).astype(np.int64)[:, None])
    write_csv_gz(raw / "num-node-list.csv.gz", np.array([[N]]))
    write_csv_gz(raw / "num-edge-list.csv.gz", np.array([[edges.shape[1]]]))
    write_split(folder, "time")


def save_with_ogb(tmp_path: Path) -> Path:
    """A dataset written by ogb.io.DatasetSaver (deflated npz, split_dict.pt, meta_dict.pt); its folder."""
    saver_module = ogb_module("ogb.io.save_dataset")
    edges, features, labels = toy_graph()
    saver = saver_module.DatasetSaver("ogbn-toy", is_hetero=False, version=1, root=str(tmp_path / "sub"))
    saver.save_graph_list([{"edge_index": edges, "num_nodes": N, "node_feat": features}])
    saver.save_task_info("multiclass classification", "acc", num_classes=4)
    saver.save_target_labels(labels[:, None])
    saver.save_split(SPLIT, "random")
    (tmp_path / "mapping").mkdir()
    (tmp_path / "mapping" / "README.md").write_text("toy mapping\n")
    saver.copy_mapping_dir(str(tmp_path / "mapping"))
    saver.get_meta_dict()
    return tmp_path / "sub_ogbn_toy"


def all_edges(source: OgbSource, per_chunk: int) -> np.ndarray:
    chunks = source.edge_chunks(per_chunk)
    blocks = [pickle.loads(pickle.dumps(chunk)).read() for chunk in chunks]
    return np.stack([np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])])


def check_contents(source: OgbSource, workdir: Path, num_classes: int, labels_nan: bool = True) -> None:
    edges, features, labels = toy_graph()
    source.prepare(str(workdir))
    assert source.num_nodes() == N
    assert np.array_equal(all_edges(source, 100), edges)
    data = source.node_data()
    assert data.features is not None and data.features.num_rows == N and data.features.num_features == 5
    rows = np.array([0, 7, 63])
    assert np.allclose(data.features.read_rows(rows), features[rows], atol=1e-6)
    want = np.where(np.isnan(labels), -1 if labels_nan else 0, np.nan_to_num(labels)).astype(np.int64)
    assert data.labels is not None and data.labels.dtype == np.int64 and np.array_equal(data.labels, want)
    assert data.split is not None and data.split.dtype == np.int8
    assert np.array_equal(data.split, expected_split())
    assert data.num_classes == num_classes


@pytest.mark.parametrize("which", ["submission", "dataset"])
def test_datasetsaver_folder(tmp_path: Path, which: str) -> None:
    submission = save_with_ogb(tmp_path)
    source = open_ogb(str(submission if which == "submission" else submission / "toy"))
    assert source.directed and source.name == "toy"
    check_contents(source, tmp_path / "work", num_classes=4)
    copies = [entry.path.name for entry in list_entries(tmp_path / "work")]
    assert [name.rsplit(".", 2)[1] for name in copies] == ["edge_index", "node_feat", "node_label"]
    described = source.describe()
    assert described["format"] == "ogb-npz" and described["num_edges"] == 256
    assert "raw/data.npz" in described["sha256_first_mib_last_mib_size"]


def test_papers100m_layout_stored_npz_is_mapped_in_place(tmp_path: Path) -> None:
    write_binary(tmp_path / "ogbn_papers100M", compressed=False)
    source = open_ogb("papers100M", str(tmp_path))
    assert source.name == "ogbn-papers100M" and source.directed
    check_contents(source, tmp_path / "work", num_classes=172)
    assert not (tmp_path / "work").exists() or not os.listdir(tmp_path / "work")


def test_arxiv_csv_form_under_gtool_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_csv_form(tmp_path / "ogbn_arxiv")
    monkeypatch.setenv("GTOOL_DATA", str(tmp_path))
    source = open_ogb("OGBN-ARXIV", None)
    with pytest.raises(RuntimeError, match="prepare"):
        source.edge_chunks(100)
    check_contents(source, tmp_path / "work", num_classes=40, labels_nan=False)
    assert source.describe()["format"] == "ogb-csv"


@pytest.mark.parametrize(
    ("spec", "name", "directed"),
    [
        ("arxiv", "ogbn-arxiv", True),
        ("ogbn_products", "ogbn-products", False),
        ("ogbn-papers100M", "ogbn-papers100M", True),
        ("PAPERS100M", "ogbn-papers100M", True),
    ],
)
def test_names(spec: str, name: str, directed: bool) -> None:
    info = known_dataset(spec)
    assert info is not None and info.name == name and info.directed == directed
    assert info.refusal() is None


@pytest.mark.parametrize(
    ("folder", "name"),
    [("ogbn_arxiv", "ogbn-arxiv"), ("ARXIV", "ogbn-arxiv"), ("Papers100M", "ogbn-papers100M")],
)
def test_folder_names_in_any_case(folder: str, name: str) -> None:
    info = known_folder(folder)
    assert info is not None and info.name == name
    assert known_folder("my-graph") is None


def test_missing_dataset_without_network_says_what_to_put_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(url: str, folder: str, log: bool = True) -> str:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(ogb_module("ogb.utils.url"), "download_url", no_network)
    with pytest.raises(InputError) as failure:
        open_ogb("ogbn-papers100M", str(tmp_path))
    message = str(failure.value)
    wanted = (
        f"put ogbn_papers100M/raw/data.npz, ogbn_papers100M/raw/node-label.npz and "
        f"ogbn_papers100M/split/time/{{train,valid,test}}.csv.gz under {tmp_path}"
    )
    assert wanted in message and "no network" in message
    assert "download http://snap.stanford.edu/ogb/data/nodeproppred/papers100M-bin.zip" in message
    assert os.listdir(tmp_path) == []


def test_no_download_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ogb_module("ogb.utils.url"), "download_url", pytest.fail)
    with pytest.raises(InputError, match="missing raw/edge.csv.gz"):
        open_ogb("arxiv", str(tmp_path), download=False)


def test_fetch_unzips_the_download_into_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_csv_form(tmp_path / "zip" / "arxiv")
    archive = shutil.make_archive(str(tmp_path / "arxiv"), "zip", tmp_path / "zip")

    def local_copy(url: str, folder: str, log: bool = True) -> str:
        assert url.endswith("/arxiv.zip")
        os.makedirs(folder, exist_ok=True)
        return shutil.copy(archive, folder)

    monkeypatch.setattr(ogb_module("ogb.utils.url"), "download_url", local_copy)
    root = tmp_path / "root"
    check_contents(open_ogb("arxiv", str(root)), tmp_path / "work", num_classes=40, labels_nan=False)
    assert sorted(os.listdir(root)) == ["ogbn_arxiv"]


def test_non_ogb_folders_name_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(InputError, match=r"not an OGB dataset folder: missing raw/") as failure:
        open_ogb(str(tmp_path))
    assert str(tmp_path) in str(failure.value)
    (tmp_path / "raw").mkdir()
    with pytest.raises(InputError, match=r"expected raw/data.npz or raw/edge.csv.gz"):
        open_ogb(str(tmp_path))
    arxiv = tmp_path / "more" / "ogbn_arxiv"
    write_csv_form(arxiv)
    os.remove(arxiv / "raw" / "num-edge-list.csv.gz")
    with pytest.raises(InputError, match=r"incomplete OGB dataset: missing raw/num-edge-list.csv.gz"):
        open_ogb(str(arxiv))
    with pytest.raises(InputError, match="neither an OGB dataset"):
        open_ogb(str(tmp_path / "nowhere"))


def test_bad_values_name_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "ogbn_arxiv"
    write_csv_form(folder)
    edges = toy_graph()[0].T.astype(str)
    edges[6, 1] = "x7"
    write_csv_gz(folder / "raw" / "edge.csv.gz", edges)
    write_csv_gz(folder / "split" / "time" / "valid.csv.gz", np.array([[31], [32], [N]]))
    source = open_ogb(str(folder))
    with pytest.raises(InputError, match=r"edge.csv.gz, line 7: expected a number"):
        source.prepare(str(tmp_path / "work"))
    with pytest.raises(InputError, match=rf"valid.csv.gz, line 3: node id {N} out of range"):
        source.node_data()


def test_overlapping_split_and_bad_labels(tmp_path: Path) -> None:
    folder = tmp_path / "ogbn_arxiv"
    write_csv_form(folder)
    write_csv_gz(folder / "split" / "time" / "test.csv.gz", np.array([[40], [5]]))
    with pytest.raises(InputError, match=r"test.csv.gz, line 2: node 5 is in both the train and the test"):
        open_ogb(str(folder)).node_data()
    write_split(folder, "time")
    write_csv_gz(folder / "raw" / "node-label.csv.gz", np.r_[np.zeros(N - 1), 40][:, None].astype(int))
    with pytest.raises(InputError, match=rf"node-label.csv.gz, line {N}: label 40 is >= the 40 classes"):
        open_ogb(str(folder)).node_data()


def test_edge_errors_name_line_or_array_index(tmp_path: Path) -> None:
    write_csv_form(tmp_path / "ogbn_arxiv")
    write_binary(tmp_path / "ogbn_papers100M", compressed=False)
    edges = toy_graph()[0]
    k = int(np.flatnonzero(edges[0] >= 8)[0])
    located = {"ogbn_arxiv": f"edge.csv.gz, line {k + 1}", "ogbn_papers100M": f"edge_index[:, {k}]"}
    for folder, where in located.items():
        source = open_ogb(str(tmp_path / folder))
        source.prepare(str(tmp_path / "work"))
        problem = f"{where}: source node id {edges[0, k]} is >= the declared"
        with pytest.raises(InputError, match=re.escape(problem)):
            check_edge_ids(source.edge_chunks(1 << 20)[0].read(), 8)


class RunsShell:
    """What a hostile split_dict.pt could hold: unpickling it would run a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_split_dict_with_code_is_refused(tmp_path: Path) -> None:
    write_binary(tmp_path / "data", compressed=True)
    shutil.rmtree(tmp_path / "data" / "split" / "time")
    (tmp_path / "data" / "split" / "time").mkdir()
    marker = tmp_path / "pwned"
    torch.save({**SPLIT, "train": RunsShell(marker)}, tmp_path / "data" / "split" / "time" / "split_dict.pt")
    with pytest.raises(InputError, match=r"split_dict.pt: cannot read it with torch.load\(weights_only"):
        open_ogb(str(tmp_path / "data")).node_data()
    assert not marker.exists()


@pytest.mark.parametrize(
    ("form", "bad", "where"),
    [
        ("binary", np.nan, "data.npz[node_feat], row 6, column 2"),
        ("binary", -np.inf, "data.npz[node_feat], row 6, column 2"),
        ("csv", np.inf, "node-feat.csv.gz, line 7, column 3"),
    ],
)
def test_non_finite_features_are_refused(tmp_path: Path, form: str, bad: float, where: str) -> None:
    folder = tmp_path / ("ogbn_papers100M" if form == "binary" else "ogbn_arxiv")
    edges, features, _ = toy_graph()
    features[6, 2] = bad
    if form == "binary":
        write_binary(folder, compressed=False)
        counts = {"num_nodes_list": np.array([N]), "num_edges_list": np.array([edges.shape[1]])}
        np.savez(folder / "raw" / "data.npz", edge_index=edges, node_feat=features, **counts)
    else:
        write_csv_form(folder)
        write_csv_gz(folder / "raw" / "node-feat.csv.gz", features)
    source = open_ogb(str(folder))
    source.prepare(str(tmp_path / "work"))
    data = source.node_data()
    assert data.features is not None
    with pytest.raises(InputError, match=re.escape(f"{where}: feature {bad} is not a finite float32")):
        data.features.read_rows(np.arange(N))


@pytest.mark.parametrize("compressed", [False, True])
def test_fortran_order_node_feat_is_read_in_c_order_blocks(tmp_path: Path, compressed: bool) -> None:
    folder = tmp_path / "ogbn_papers100M"
    write_binary(folder, compressed)
    edges, features, _ = toy_graph()
    counts = {"num_nodes_list": np.array([N]), "num_edges_list": np.array([edges.shape[1]])}
    save = np.savez_compressed if compressed else np.savez
    save(folder / "raw" / "data.npz", edge_index=edges, node_feat=np.asfortranarray(features), **counts)
    source = open_ogb(str(folder))
    source.prepare(str(tmp_path / "work"))
    data = source.node_data()
    assert data.features is not None
    block = data.features.read_block(5, 40)
    assert block.flags.c_contiguous
    np.testing.assert_array_equal(block, features[5:40])


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_split_dict_as_plain_pickle_says_why(tmp_path: Path) -> None:
    write_binary(tmp_path / "data", compressed=True)
    shutil.rmtree(tmp_path / "data" / "split" / "time")
    (tmp_path / "data" / "split" / "time").mkdir()
    (tmp_path / "data" / "split" / "time" / "split_dict.pt").write_bytes(pickle.dumps(SPLIT, protocol=4))
    with pytest.raises(InputError) as info:
        open_ogb(str(tmp_path / "data")).node_data()
    assert info.value.where.endswith("split_dict.pt")
    reason = "not a torch.save archive, perhaps a plain pickle (Unsupported operand"
    assert info.value.problem.startswith(f"cannot read it with torch.load(weights_only=True): {reason}")
