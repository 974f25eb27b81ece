"""Planetoid sources: Cora as Kipf & Welling load it, CiteSeer's isolated test nodes, refused pickles."""

from __future__ import annotations

import os
import pickle
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gtool.errors import InputError
from gtool.preprocess.sources.base import check_edge_ids
from gtool.preprocess.sources.planetoid.source import PlanetoidSource, open_planetoid


def read_edges(source: PlanetoidSource, edges_per_chunk: int) -> tuple[np.ndarray, np.ndarray]:
    blocks = [pickle.loads(pickle.dumps(chunk)).read() for chunk in source.edge_chunks(edges_per_chunk)]
    for block in blocks:
        check_edge_ids(block, source.num_nodes())
    return np.concatenate([b.src for b in blocks]), np.concatenate([b.dst for b in blocks])


def undirected_edges(src: np.ndarray, dst: np.ndarray) -> set[tuple[int, int]]:
    """The symmetrized, deduplicated edge set without self loops, as (low, high) pairs."""
    return {(min(a, b), max(a, b)) for a, b in zip(src.tolist(), dst.tolist(), strict=True) if a != b}


def test_cora(cora_dir: Path) -> None:
    source = open_planetoid(str(cora_dir))
    assert source.name == "cora" and not source.directed and source.num_nodes() == 2708
    src, dst = read_edges(source, 1 << 20)
    assert len(undirected_edges(src, dst)) == 5278
    assert np.array_equal(np.concatenate(read_edges(source, 1000)), np.concatenate([src, dst]))
    data = source.node_data()
    assert data.features is not None and data.features.num_features == 1433 and data.features.num_rows == 2708
    rows = data.features.read_rows(np.arange(0, 2708, 7))
    assert rows.dtype == np.float32 and set(np.unique(rows)) <= {0.0, 1.0}
    assert data.num_classes == 7 and data.labels is not None and data.labels.dtype == np.int64
    assert data.split is not None and data.split.dtype == np.int8
    assert [int((data.split == code).sum()) for code in (0, 1, 2)] == [140, 500, 1000]
    assert np.array_equal(np.bincount(data.labels[data.split == 0]), [20] * 7)
    assert np.array_equal(np.flatnonzero(data.split == 2), np.arange(1708, 2708))
    assert "ind.cora.graph" in source.describe()["sha256_first_mib_last_mib_size"]


def kipf_load_data(x, y, tx, ty, allx, ally, test_idx_reorder):
    """gcn/utils.py load_data (Kipf & Welling), verbatim apart from taking the objects as arguments."""
    test_idx_range = np.sort(test_idx_reorder)
    test_idx_range_full = range(min(test_idx_reorder), max(test_idx_reorder) + 1)
    tx_extended = sp.lil_matrix((len(test_idx_range_full), x.shape[1]))
    tx_extended[test_idx_range - min(test_idx_range), :] = tx
    tx = tx_extended
    ty_extended = np.zeros((len(test_idx_range_full), y.shape[1]))
    ty_extended[test_idx_range - min(test_idx_range), :] = ty
    ty = ty_extended
    features = sp.vstack((allx, tx)).tolil()
    features[test_idx_reorder, :] = features[test_idx_range, :]
    labels = np.vstack((ally, ty))
    labels[test_idx_reorder, :] = labels[test_idx_range, :]
    return features.tocsr(), labels, test_idx_range


def test_isolated_test_nodes_are_padded_like_kipf(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    num_all, span, num_classes = 510, 20, 3
    test = rng.permutation(num_all + np.sort(rng.choice(span, 15, replace=False)))  # gaps, shuffled order

    def binary(rows: int) -> sp.csr_matrix:
        return sp.csr_matrix((rng.random((rows, 6)) < 0.3).astype(np.float32))

    def hot(rows: int) -> np.ndarray:
        return np.eye(num_classes, dtype=np.int32)[rng.integers(0, num_classes, rows)]

    objects = {
        "x": binary(9),
        "y": hot(9),
        "tx": binary(15),
        "ty": hot(15),
        "allx": binary(num_all),
        "ally": hot(num_all),
        "graph": defaultdict(list, {i: [(i + 1) % 530] for i in range(530)}),
    }
    for part, obj in objects.items():
        (tmp_path / f"ind.toy.{part}").write_bytes(pickle.dumps(obj, protocol=4))
    (tmp_path / "ind.toy.test.index").write_text("".join(f"{i}\n" for i in test))
    data = open_planetoid(str(tmp_path)).node_data()
    parts = [objects[p] for p in ("x", "y", "tx", "ty", "allx", "ally")]
    features, labels, test_range = kipf_load_data(*parts, list(test))
    assert data.features is not None and data.labels is not None and data.split is not None
    assert np.array_equal(data.features.read_rows(np.arange(530)), features.toarray())
    labelled = labels.any(axis=1)
    assert np.array_equal(data.labels[labelled], labels.argmax(axis=1)[labelled])
    assert np.all(data.labels[~labelled] == -1) and (~labelled).sum() == 5
    assert np.array_equal(np.flatnonzero(data.split == 2), test_range)
    assert np.array_equal(np.flatnonzero(data.split == 1), np.arange(9, 509))


class RunsShell:
    """What a hostile pickle could hold: loading it with plain pickle would run a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("part", ["graph", "allx"])
def test_pickles_naming_other_code_are_refused(tmp_path: Path, cora_dir: Path, part: str) -> None:
    folder = tmp_path / "cora"
    shutil.copytree(cora_dir, folder)
    marker = tmp_path / "pwned"
    target = folder / f"ind.cora.{part}"
    target.chmod(0o644)
    target.write_bytes(pickle.dumps(RunsShell(marker), protocol=2))
    refused = rf"ind.cora.{part}: the pickle refers to \w+\.system, which gtool refuses to load"
    with pytest.raises(InputError, match=refused):
        open_planetoid(str(folder))
    assert not marker.exists()


def test_folders_without_one_planetoid_dataset(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="found none"):
        open_planetoid(str(tmp_path))
    (tmp_path / "ind.cora.graph").write_bytes(b"")
    with pytest.raises(InputError, match=r"missing ind.cora.x, ind.cora.y"):
        open_planetoid(str(tmp_path))
