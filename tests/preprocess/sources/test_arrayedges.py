"""Array edge files (.npy, .npz) and Parquet tables: layouts, chunking, and errors naming the index."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gtool.errors import InputError
from gtool.preprocess.sources.base import check_edge_ids
from gtool.preprocess.sources.edgefiles import open_edge_file
from tests.preprocess.sources.helpers import multiset, read_all, rmat_edges


@pytest.mark.parametrize("layout", ["2xM", "Mx2", "2xM-fortran", "int32"])
def test_npy_round_trip(tmp_path: Path, layout: str) -> None:
    src, dst = rmat_edges()
    arr = np.stack([src, dst]) if layout != "Mx2" else np.stack([src, dst], axis=1)
    arr = np.asfortranarray(arr) if layout == "2xM-fortran" else arr
    arr = arr.astype(np.int32) if layout == "int32" else arr
    np.save(tmp_path / "g.npy", arr)
    source = open_edge_file(str(tmp_path / "g.npy"))
    assert source.num_nodes() is None
    assert multiset(*read_all(source, tmp_path / "work", 100)) == multiset(src, dst)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_edge_index_round_trip(tmp_path: Path, save) -> None:
    src, dst = rmat_edges()
    save(tmp_path / "g.npz", edge_index=np.stack([src, dst]), num_nodes=np.int64(300))
    source = open_edge_file(str(tmp_path / "g.npz"))
    assert source.num_nodes() == 300
    assert multiset(*read_all(source, tmp_path / "work", 100)) == multiset(src, dst)
    assert source.describe()["arrays"] == ["edge_index"]


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
@pytest.mark.parametrize("layout", ["2xM", "Mx2"])
def test_npz_of_one_unnamed_array(tmp_path: Path, save, layout: str) -> None:
    src, dst = rmat_edges()
    edges = np.stack([src, dst]) if layout == "2xM" else np.stack([src, dst], axis=1)
    save(tmp_path / "g.npz", edges)
    source = open_edge_file(str(tmp_path / "g.npz"))
    assert source.num_nodes() is None and source.describe()["arrays"] == ["arr_0"]
    assert multiset(*read_all(source, tmp_path / "work", 100)) == multiset(src, dst)
    save(tmp_path / "n.npz", edges, num_nodes=np.int64(300))
    assert open_edge_file(str(tmp_path / "n.npz")).num_nodes() == 300


def test_npz_src_dst_compressed_needs_prepare(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    np.savez_compressed(tmp_path / "g.npz", src=src, dst=dst.astype(np.uint32))
    source = open_edge_file(str(tmp_path / "g.npz"), num_nodes=256)
    with pytest.raises(RuntimeError, match="prepare"):
        source.edge_chunks(100)
    assert multiset(*read_all(source, tmp_path / "work", 100)) == multiset(src, dst)
    chunk = pickle.loads(pickle.dumps(source.edge_chunks(100)[0]))
    assert len(chunk.read()) == 100


def test_npy_of_floats(tmp_path: Path) -> None:
    np.save(tmp_path / "f.npy", np.array([[0.0, 2.0, 1.0], [1.0, 1.5, 2.0]]))
    chunk = open_edge_file(str(tmp_path / "f.npy")).edge_chunks(10)[0]
    with pytest.raises(InputError, match="expected an integer node id, got 1.5") as info:
        chunk.read()
    assert info.value.index == "array[1, 1]" and info.value.where == str(tmp_path / "f.npy")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_whole_floats_are_ids(tmp_path: Path, dtype: type) -> None:
    np.save(tmp_path / "f.npy", np.array([[0.0, 2.0], [1.0, 3.0]], dtype=dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float16 overflowed comparing with 2^63
        assert multiset(*read_all(open_edge_file(str(tmp_path / "f.npy")), tmp_path)) == [(0, 1), (2, 3)]


def test_id_beyond_declared_count_names_the_edge(tmp_path: Path) -> None:
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2], [1, 2, 9]]))
    source = open_edge_file(str(tmp_path / "g.npz"), num_nodes=5)
    block = source.edge_chunks(10)[0].read()
    with pytest.raises(InputError, match="destination node id 9") as info:
        check_edge_ids(block, source.num_nodes())
    assert info.value.index == "edge_index[:, 2]"


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"edge_index": np.zeros((3, 4), np.int64)}, "2 x M or M x 2"),
        ({"edges": np.zeros((2, 4), np.int64), "weights": np.ones(4)}, "named 'edge_index', or the only one"),
        ({"edges": np.zeros((4,), np.int64)}, r"g.npz\[edges\]: expected a 2 x M or M x 2 edge array"),
        ({"src": np.zeros(3, np.int64), "dst": np.zeros(4, np.int64)}, "equal lengths"),
        ({"edge_index": np.zeros((2, 4), bool)}, "dtype bool"),
        ({"edge_index": np.zeros((2, 4), np.int64), "num_nodes": np.float32(3)}, "integer scalar"),
    ],
)
def test_npz_errors(tmp_path: Path, arrays: dict, message: str) -> None:
    np.savez(tmp_path / "g.npz", **arrays)
    with pytest.raises(InputError, match=message):
        open_edge_file(str(tmp_path / "g.npz"))


def test_object_array_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([[0, None], [1, 2]], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickles"):
        open_edge_file(str(tmp_path / "o.npy"))


def test_empty_edge_array_reads_as_empty_block(tmp_path: Path) -> None:
    np.save(tmp_path / "e.npy", np.zeros((2, 0), np.int64))
    assert [len(c.read()) for c in open_edge_file(str(tmp_path / "e.npy")).edge_chunks(10)] == [0]


def test_parquet_round_trip_by_row_groups(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    table = pa.table({"src": src, "dst": dst.astype(np.int32), "w": np.ones(len(src))})
    pq.write_table(table, tmp_path / "g.parquet", row_group_size=100)
    source = open_edge_file(str(tmp_path / "g.parquet"))
    chunks = source.edge_chunks(250)
    assert [c.last_group - c.first_group for c in chunks[:3]] == [2, 2, 2]
    assert multiset(*read_all(source, tmp_path / "work", 250)) == multiset(src, dst)


def test_parquet_errors_name_the_row(tmp_path: Path) -> None:
    pq.write_table(pa.table({"src": [0, 1, 2], "dst": [1, None, 0]}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match="'dst' is null") as info:
        open_edge_file(str(tmp_path / "n.parquet")).edge_chunks(10)[0].read()
    assert info.value.index == "row 1"
    pq.write_table(pa.table({"src": [0.0, 0.5], "dst": [1.0, 2.0]}), tmp_path / "f.parquet")
    with pytest.raises(InputError, match="got 0.5") as info:
        open_edge_file(str(tmp_path / "f.parquet")).edge_chunks(10)[0].read()
    assert info.value.index == "row 1, column 'src'"
    pq.write_table(pa.table({"a": [0], "b": [1]}), tmp_path / "c.parquet")
    with pytest.raises(InputError, match="columns 'src' and 'dst'"):
        open_edge_file(str(tmp_path / "c.parquet"))
