"""The chunked readers of OGB's headerless .csv.gz files: values, block boundaries, errors by line."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from gtool.errors import InputError
from gtool.preprocess.sources.ogb import csvfiles as ogb_csv
from gtool.store.writing.atomic import write_atomically


def gz(path: Path, text: str) -> str:
    with gzip.open(path, "wt") as f:
        f.write(text)
    return str(path)


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two-row blocks for 2-column files, so that errors fall in later blocks."""
    monkeypatch.setattr(ogb_csv, "BLOCK_BYTES", 32)


@pytest.mark.parametrize(
    ("text", "problem", "line"),
    [
        ("1,2\n3,4\n5,6\n7,x\n", "expected a number", 4),
        ("1,2\n3,4\n5,6\n\n", "missing value", 4),
        ("1,2\n3,4\n5\n", "missing value", 3),
        ("1,2\n3,4\n5,6,7\n", "expected 2 comma-separated values, found 3", 3),
        ("1,2,7\n3,4,7\n", "expected 2 comma-separated values per line, found 3", 1),
        ("1,2\n3,4.5\n", "expected an integer", 2),
    ],
)
def test_errors_name_the_line(tmp_path: Path, tiny_blocks: None, text: str, problem: str, line: int) -> None:
    path = gz(tmp_path / "edge.csv.gz", text)
    with pytest.raises(InputError, match=f"edge.csv.gz, line {line}: {problem}"):
        list(ogb_csv.iter_csv_blocks(path, 2, integer=True))


def test_blocks_and_nan(tmp_path: Path, tiny_blocks: None) -> None:
    path = gz(tmp_path / "edge.csv.gz", "".join(f"{i},{i + 1}\n" for i in range(5)))
    blocks = list(ogb_csv.iter_csv_blocks(path, 2, integer=True))
    assert [line for line, _ in blocks] == [1, 3, 5]
    assert all(block.dtype == np.int64 for _, block in blocks)
    path = gz(tmp_path / "node-label.csv.gz", "3\nnan\n1\n")
    labels = ogb_csv.read_csv_column(path, integer=True, allow_nan=True)
    assert np.array_equal(labels, [3, np.nan, 1], equal_nan=True)
    assert ogb_csv.count_columns(gz(tmp_path / "f.csv.gz", "0.5,1,2\n")) == 3


def test_npy_from_csv_stores_edges_as_2_by_e(tmp_path: Path, tiny_blocks: None) -> None:
    src = gz(tmp_path / "edge.csv.gz", "".join(f"{i},{10 * i}\n" for i in range(5)))

    def convert(name: str, rows: int) -> str:
        write = ogb_csv.npy_from_csv(src, (rows, 2), np.int64, expected="edges", edges=True)
        return write_atomically(str(tmp_path / name), write)

    edges = np.load(convert("e.npy", 5), mmap_mode="r")
    assert edges.shape == (2, 5) and np.array_equal(edges[1], 10 * np.arange(5))
    with pytest.raises(InputError, match=r"edge.csv.gz, line 5: more lines than the 4 edges"):
        convert("f.npy", 4)
    with pytest.raises(InputError, match=r"edge.csv.gz: 5 lines, expected 6 \(edges\)"):
        convert("g.npy", 6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.npy", "edge.csv.gz"]
