"""Every source kind through the whole pipeline: tiles equal Pr Â Pc^T and Pc Â Pr^T, node data permuted."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gtool.store import layout
from gtool.store.reader import Store, open_store
from tests.preprocess.sources.helpers import rmat_edges
from tests.preprocess.sources.ogb.test_ogb import N as OGB_NODES
from tests.preprocess.sources.ogb.test_ogb import expected_split, save_with_ogb, toy_graph
from tests.support.reference import assert_same_sparse, normalized_adjacency, permuted, reassemble
from tests.support.stores import make_store

pytestmark = pytest.mark.integration  # builds stores / runs the command line

NODES = 256


def text_lines(src: np.ndarray, dst: np.ndarray, sep: str, base: int = 0) -> str:
    return "".join(f"{s + base}{sep}{d + base}\n" for s, d in zip(src, dst, strict=True))


def write_txt(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_text("# SNAP style\n% another comment\n" + text_lines(src, dst, " \t "))


def write_csv(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_text(text_lines(src, dst, ","))


def write_tsv_gz(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_bytes(gzip.compress(text_lines(src, dst, "\t").encode()))


def mtx_text(src: np.ndarray, dst: np.ndarray) -> str:
    header = f"%%MatrixMarket matrix coordinate pattern general\n% test\n{NODES} {NODES} {src.size}\n"
    return header + text_lines(src, dst, " ", base=1)


def write_mtx(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_text(mtx_text(src, dst))


def write_mtx_gz(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    path.write_bytes(gzip.compress(mtx_text(src, dst).encode()))


def write_npy(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    np.save(path, np.stack([src, dst]))


def write_npy_rows(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    np.save(path, np.stack([src, dst], axis=1).astype(np.int32))


def write_npz(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    np.savez(path, src=src, dst=dst, num_nodes=np.int64(NODES))


def write_npz_deflated(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    np.savez_compressed(path, edge_index=np.stack([src, dst]))


def write_parquet(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    pq.write_table(pa.table({"src": src, "dst": dst}), path, row_group_size=300)


WRITERS: dict[str, Callable[[Path, np.ndarray, np.ndarray], None]] = {
    "edges.txt": write_txt,
    "edges.csv": write_csv,
    "edges.tsv.gz": write_tsv_gz,
    "edges.mtx": write_mtx,
    "edges.mtx.gz": write_mtx_gz,
    "edges.npy": write_npy,
    "rows.npy": write_npy_rows,
    "edges.npz": write_npz,
    "deflated.npz": write_npz_deflated,
    "edges.parquet": write_parquet,
}


def assert_matrices(store: Store, src: np.ndarray, dst: np.ndarray, n: int, directed: bool) -> None:
    adj = normalized_adjacency(src, dst, n, directed=directed)
    pr, pc = store.perm("r"), store.perm("c")
    assert_same_sparse(reassemble(store, 0), permuted(adj, pr, pc))
    assert_same_sparse(reassemble(store, 1), permuted(adj, pc, pr))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("name", sorted(WRITERS))
def test_edge_file_formats(tmp_path, name, directed):
    """Each format read by worker processes (directed) and in this process (undirected: one worker, or
    no cluster for a graph this small whose size the format tells)."""
    src, dst = rmat_edges()
    path = tmp_path / name
    WRITERS[name](path, src, dst)
    workers = 2 if directed else 1
    options = {"tiles": 3, "seed": 5, "directed": directed, "num_nodes": NODES, "workers": workers}
    store = open_store(make_store(str(path), tmp_path / "s.zarr", **options))
    assert store.num_nodes == NODES
    assert_matrices(store, src, dst, NODES, directed)


def test_node_count_from_max_id_without_declaration(tmp_path):
    src, dst = rmat_edges()
    write_txt(tmp_path / "e.txt", src, dst)
    store = open_store(make_store(str(tmp_path / "e.txt"), tmp_path / "s.zarr", tiles=4, chunk_edges=300))
    n = int(max(src.max(), dst.max())) + 1
    assert store.num_nodes == n
    assert_matrices(store, src, dst, n, directed=False)


def test_node_files_are_permuted_consistently(tmp_path):
    src, dst = rmat_edges()
    write_npy(tmp_path / "e.npy", src, dst)
    rng = np.random.default_rng(0)
    features = rng.random((NODES, 5), dtype=np.float32)
    labels = rng.integers(-1, 4, NODES)
    split = rng.integers(-1, 3, NODES).astype(np.int8)
    for name, value in (("x.npy", features), ("y.npy", labels), ("split.npy", split)):
        np.save(tmp_path / name, value)
    store = open_store(
        make_store(
            str(tmp_path / "e.npy"),
            tmp_path / "s.zarr",
            tiles=3,
            num_nodes=NODES,
            features=str(tmp_path / "x.npy"),
            labels=str(tmp_path / "y.npy"),
            split=str(tmp_path / "split.npy"),
        )
    )
    pr, pc = store.perm("r"), store.perm("c")
    np.testing.assert_array_equal(store.array(layout.FEATURES)[:], features[pc])
    for order, perm in (("r", pr), ("c", pc)):
        np.testing.assert_array_equal(store.array(layout.LABELS[order])[:], labels[perm])
        np.testing.assert_array_equal(store.array(layout.SPLIT[order])[:], split[perm])
    assert store.num_classes == 4


@pytest.mark.parametrize("save", ["npy", "deflated npz"])
def test_fortran_order_features_give_the_c_order_runs_store(tmp_path, save):
    src, dst = rmat_edges()
    write_npy(tmp_path / "e.npy", src, dst)
    features = np.random.default_rng(1).random((NODES, 6), dtype=np.float32)
    np.save(tmp_path / "x.npy", features)
    if save == "npy":
        np.save(tmp_path / "xf.npy", np.asfortranarray(features))
    else:
        np.savez_compressed(tmp_path / "xf.npz", x=np.asfortranarray(features))
    stores = [
        open_store(
            make_store(
                str(tmp_path / "e.npy"),
                tmp_path / f"{name}.zarr",
                tiles=3,
                num_nodes=NODES,
                features=str(tmp_path / name),
            )
        )
        for name in ("x.npy", "xf.npy" if save == "npy" else "xf.npz")
    ]
    pc = stores[0].perm("c")
    np.testing.assert_array_equal(stores[1].perm("c"), pc)
    for store in stores:
        np.testing.assert_array_equal(store.array(layout.FEATURES)[:], features[pc])


def test_ogb_dataset_saver_folder(tmp_path):
    edges, features, labels = toy_graph()
    folder = save_with_ogb(tmp_path)
    store = open_store(make_store(str(folder), tmp_path / "s.zarr", tiles=3, seed=1))
    assert store.num_nodes == OGB_NODES and store.num_classes == 4
    assert_matrices(store, edges[0], edges[1], OGB_NODES, directed=False)
    pr, pc = store.perm("r"), store.perm("c")
    np.testing.assert_array_equal(store.array(layout.FEATURES)[:], features[pc])
    expected_labels = np.where(np.isnan(labels), -1, labels).astype(np.int64)
    np.testing.assert_array_equal(store.array(layout.LABELS["r"])[:], expected_labels[pr])
    np.testing.assert_array_equal(store.array(layout.SPLIT["c"])[:], expected_split()[pc])
