"""Input values and sizes refused where they enter `gtool shard`, before any cluster starts or anything is
planned from them: one `error:` line naming the file (or array) and what was expected, exit status 2,
and no store left behind. (These are unit tests: a cluster started here would fail the test.)"""

from __future__ import annotations

import gzip
import pickle
import shutil
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.store.reader import open_store


def shard(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["shard", *args, "-q"], env={"COLUMNS": "400"})
    return result.exit_code, result.output


def refused(tmp_path: Path, *args: str) -> str:
    """The one error line of a refused `gtool shard ... -o tmp/s.zarr`; checks that nothing is left."""
    code, output = shard(*args, "-o", str(tmp_path / "s.zarr"))
    assert code == 2, output
    assert not (tmp_path / "s.zarr").exists() and not list(tmp_path.glob(".s.zarr*"))
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


def copy_cora(cora_dir: Path, folder: Path) -> Path:
    shutil.copytree(cora_dir, folder)
    for file in folder.iterdir():
        file.chmod(0o644)
    return folder


def test_planetoid_non_finite_feature(tmp_path: Path, cora_dir: Path) -> None:
    folder = copy_cora(cora_dir, tmp_path / "cora")
    allx = folder / "ind.cora.allx"
    with warnings.catch_warnings():  # pickled with the deprecated scipy.sparse.csr namespace
        warnings.simplefilter("ignore", DeprecationWarning)
        matrix = sp.csr_matrix(pickle.loads(allx.read_bytes(), encoding="latin1"))  # the project's own file
    matrix.data[7] = np.nan
    allx.write_bytes(pickle.dumps(matrix, protocol=4))
    row = int(np.searchsorted(matrix.indptr, 7, side="right")) - 1
    line = refused(tmp_path, str(folder), "--tiles", "2x2")
    assert f"{allx}, row {row}, column {matrix.indices[7]}: feature nan is not a finite float32" in line


def test_planetoid_test_index_with_bytes_that_are_no_text(tmp_path: Path, cora_dir: Path) -> None:
    folder = copy_cora(cora_dir, tmp_path / "cora")
    index = folder / "ind.cora.test.index"
    lines = index.read_bytes().splitlines(keepends=True)
    index.write_bytes(b"".join(lines[:3] + [b"\xff\xfe12\n"] + lines[4:]))
    line = refused(tmp_path, str(folder), "--tiles", "2x2")
    assert f"{index}, line 4: expected one integer node id per line" in line


def ogb_csv_folder(folder: Path, edges: bytes) -> Path:
    """A tiny OGB dataset in CSV form (3 nodes, no node data) whose edge.csv.gz holds `edges`."""
    raw = folder / "raw"
    raw.mkdir(parents=True)
    (raw / "edge.csv.gz").write_bytes(gzip.compress(edges))
    (raw / "num-node-list.csv.gz").write_bytes(gzip.compress(b"3\n"))
    (raw / "num-edge-list.csv.gz").write_bytes(gzip.compress(b"3\n"))
    return folder


def test_ogb_edges_with_bytes_that_are_no_text(tmp_path: Path) -> None:
    folder = ogb_csv_folder(tmp_path / "ogbn_toy", b"0,1\n1,2\n\xff\xfe,0\n")
    line = refused(tmp_path, str(folder), "--tiles", "1x1", "--no-cache")
    assert f"{folder / 'raw' / 'edge.csv.gz'}: expected comma-separated numbers as UTF-8 text" in line


def lying_npy(path: Path, claimed: str) -> bytes:
    """A 24 KB .npy of 2 x 3,000 int32 edges whose header claims shape `claimed` instead."""
    np.save(path, np.zeros((2, 3000), dtype=np.int32))
    data = path.read_bytes()
    header = data[:128].decode("latin1").replace("(2, 3000)", claimed)
    header = header.rstrip("\n").rstrip(" ")
    return (header.ljust(127) + "\n").encode("latin1") + data[128:]


def test_npy_header_claiming_more_than_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "edges.npy"
    path.write_bytes(lying_npy(path, "(2, 1000000000000)"))
    line = refused(tmp_path, str(path), "--tiles", "2x2")
    assert f"{path}: truncated: its header declares shape (2, 1000000000000) of int32" in line
    assert "at most 24,000 bytes are there" in line


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_npz_member_header_claiming_more_than_the_archive_holds(tmp_path: Path, compression: int) -> None:
    path = tmp_path / "edges.npz"
    with zipfile.ZipFile(path, "w", compression) as archive:
        archive.writestr("edge_index.npy", lying_npy(tmp_path / "member.npy", "(2, 1000000000000)"))
    line = refused(tmp_path, str(path), "--tiles", "2x2")
    assert f"{path}[edge_index]: truncated: its header declares shape (2, 1000000000000)" in line


@pytest.mark.integration
@pytest.mark.parametrize(
    ("source", "tiles", "said"),
    [
        ("g.mtx", 100000, "300 nodes: tiles of 1 rows fill only 300 rows of tiles, so the last 99,700"),
        ("sbm:300:3", 128, "300 nodes: tiles of 3 rows fill only 100 rows of tiles, so the last 28"),
        ("e.txt", 20, "3 nodes: tiles of 1 rows fill only 3 rows of tiles, so the last 17"),
    ],
)
def test_tile_rows_past_the_last_node(tmp_path: Path, source: str, tiles: int, said: str) -> None:
    """Rows of tiles past the last node are refused before any tile is made, whether the node count is
    declared (Matrix Market header, generator) or counted from an edge list (sbm:300:3 --tiles 128x128
    took 132 s to write 32,768 tiles, 7,168 of them past the last node)."""
    (tmp_path / "g.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern general\n300 300 3\n1 2\n2 3\n3 1\n"
    )
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    path = str(tmp_path / source) if "." in source else source
    line = refused(tmp_path, path, "--tiles", f"{tiles}x{tiles}")
    filled = said.split("fill only ")[1].split(" ")[0].replace(",", "")
    assert line == (
        f"error: --tiles {tiles}x{tiles} of a graph of {said} would be empty (each tile costs files and "
        f"time); give --tiles {filled}x{filled}"
    )


@pytest.mark.integration
def test_the_default_tiles_of_a_graph_of_fewer_nodes(tmp_path: Path) -> None:
    """16 x 16 tiles (the default) of 3 nodes are made: 256 tiles cost little, and a tiny graph needs no
    --tiles."""
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    code, output = shard(str(tmp_path / "e.txt"), "--tiles", "16x16", "-o", str(tmp_path / "s.zarr"))
    assert code == 0, output
    assert open_store(tmp_path / "s.zarr").tiles == 16


def test_node_count_beyond_this_machine_whatever_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "e.txt"
    path.write_text("0 1\n1 2\n")
    line = refused(tmp_path, str(path), "--num-nodes", str(10**12), "--memory-limit", "100000TB")
    assert "1,000,000,000,000 nodes need about" in line and "more than this machine's" in line
