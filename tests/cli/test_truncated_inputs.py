"""Every input format cut short fails `gtool shard` with a message naming the file, never a smaller graph."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from gtool.cli.main import app
from tests.preprocess.sources.helpers import rmat_edges
from tests.preprocess.sources.sparse.test_sparse_npz import benchmark_arrays, rmat_matrix
from tests.preprocess.test_pipeline_sources import WRITERS

pytestmark = pytest.mark.integration  # builds stores / runs the command line


def shard(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["shard", *args, "--tiles", "2x2", "-q"], env={"COLUMNS": "300"})
    return result.exit_code, result.output


def write_scipy_csr(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    sp.save_npz(path, rmat_matrix().tocsr())


def write_benchmark(path: Path, src: np.ndarray, dst: np.ndarray) -> None:
    np.savez_compressed(path, **benchmark_arrays(np.random.default_rng(0))[0])


CUT_WRITERS: dict[str, Callable[[Path, np.ndarray, np.ndarray], None]] = {
    **{name: WRITERS[name] for name in WRITERS if not name.endswith((".txt", ".csv"))},
    "scipy-csr.npz": write_scipy_csr,
    "benchmark.npz": write_benchmark,
}
MESSAGES = {
    ".gz": "truncated gzip",
    ".mtx": "declares 1,024 entries but the file holds",
    ".npy": "truncated",
    ".npz": "truncated or not an .npz",
    ".parquet": "expected a Parquet file",
}


def cut(path: Path, fraction: float = 0.6) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])


@pytest.mark.parametrize("name", sorted(CUT_WRITERS))
def test_cut_short_edge_file(tmp_path: Path, name: str) -> None:
    src, dst = rmat_edges()
    path = tmp_path / name
    CUT_WRITERS[name](path, src, dst)
    cut(path)
    code, output = shard(str(path), "-o", str(tmp_path / "s.zarr"))
    assert code == 2, output
    assert str(path) in output and MESSAGES[path.suffix] in output, output
    assert not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize(
    ("option", "values", "message"),
    [
        ("--features", np.ones((9, 4), np.float32), "truncated"),
        ("--labels", np.arange(9), "truncated"),
        ("--split", np.zeros(9, np.int64), "truncated"),
    ],
)
def test_cut_short_node_file(tmp_path: Path, option: str, values: np.ndarray, message: str) -> None:
    path = tmp_path / "node.npy"
    np.save(path, values)
    cut(path, 0.9)
    code, output = shard("grid:3x3", option, str(path), "-o", str(tmp_path / "s.zarr"))
    assert code == 2 and str(path) in output and message in output, output


def test_cut_short_planetoid_file(tmp_path: Path, cora_dir: Path) -> None:
    folder = Path(shutil.copytree(cora_dir, tmp_path / "cora"))
    cut(folder / "ind.cora.allx", 0.5)
    code, output = shard(str(folder), "-o", str(tmp_path / "s.zarr"))
    assert code == 2 and "ind.cora.allx" in output and "not a readable Planetoid pickle" in output, output
