"""Text edge lists: round trips, parallel byte-range chunks, gzip, and errors that name the line."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from gtool.errors import InputError
from gtool.preprocess.sources.base import check_edge_ids
from gtool.preprocess.sources.edgefiles import open_edge_file
from gtool.preprocess.sources.fileinfo import CHECKSUM_KEY
from tests.preprocess.sources.helpers import multiset, read_all, rmat_edges


def write_text(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def edge_text(src: np.ndarray, dst: np.ndarray, sep: str = "\t") -> str:
    return "".join(f"{s}{sep}{d}\n" for s, d in zip(src.tolist(), dst.tolist(), strict=True))


def first_error(path: str, tmp_path: Path, edges_per_chunk: int = 1 << 20, num_nodes: int | None = None):
    """The InputError raised while reading (and id-checking) every chunk."""
    source = open_edge_file(path, num_nodes)
    with pytest.raises(InputError) as info:
        read_all(source, tmp_path / "work", edges_per_chunk)
    return info.value


@pytest.mark.parametrize(
    ("name", "sep"), [("g.txt", "\t"), ("g.csv", ","), ("g.edges", " "), ("g.el", " , ")]
)
def test_round_trip(tmp_path: Path, name: str, sep: str) -> None:
    src, dst = rmat_edges()
    path = write_text(tmp_path / name, "# SNAP header\n% more\n\n" + edge_text(src, dst, sep))
    got = read_all(open_edge_file(path), tmp_path / "work")
    assert multiset(*got) == multiset(src, dst)


def test_gzip_round_trip_and_describe(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    path = tmp_path / "g.txt.gz"
    path.write_bytes(gzip.compress(("# c\n" + edge_text(src, dst)).encode()))
    source = open_edge_file(str(path))
    got = read_all(source, tmp_path / "work", edges_per_chunk=100)
    assert multiset(*got) == multiset(src, dst)
    description = source.describe()
    assert description["format"] == "edgelist" and description["compression"] == "gzip"
    assert len(description[CHECKSUM_KEY]) == 64 and description["size_bytes"] == path.stat().st_size


def test_gzip_needs_prepare(tmp_path: Path) -> None:
    path = tmp_path / "g.txt.gz"
    path.write_bytes(gzip.compress(b"0 1\n"))
    with pytest.raises(RuntimeError, match="prepare"):
        open_edge_file(str(path)).edge_chunks(10)


def test_chunks_cut_mid_line_read_every_edge_once(tmp_path: Path) -> None:
    lines = [f"{i * 7919 % 100003} {i}" for i in range(500)]
    path = write_text(tmp_path / "g.txt", "# header\n" + "\n".join(lines))  # no final newline
    source = open_edge_file(path)
    chunks = source.edge_chunks(7)
    assert len(chunks) > 50
    data = Path(path).read_bytes()
    assert all(c.start == 0 or data[c.start - 1 : c.start] == b"\n" for c in chunks)
    assert [c.start for c in chunks[1:]] == [c.end for c in chunks[:-1]] and chunks[-1].end == len(data)
    got = read_all(source, tmp_path / "work", 7)
    expected = [tuple(int(t) for t in line.split()) for line in lines]
    assert multiset(*got) == sorted(expected)


def test_chunks_are_picklable(tmp_path: Path) -> None:
    path = write_text(tmp_path / "g.txt", "0 1\n1 2\n2 3\n")
    chunk = open_edge_file(path).edge_chunks(1)[1]
    block = pickle.loads(pickle.dumps(chunk)).read()
    assert block.src.tolist() == [1] and block.locate(0) == (2, None)


def test_weights_are_validated_and_dropped(tmp_path: Path) -> None:
    path = write_text(tmp_path / "w.txt", "0 1 0.5\n1 2 2e3\n2 0 -1\n")
    source = open_edge_file(path)
    assert multiset(*read_all(source, tmp_path / "work")) == [(0, 1), (1, 2), (2, 0)]
    assert source.describe()["weights"] == "validated, not used"


def test_comment_only_file_reads_as_empty_blocks(tmp_path: Path) -> None:
    path = write_text(tmp_path / "empty.txt", "# nothing\n\n% here\n")
    chunks = open_edge_file(path).edge_chunks(1)
    assert chunks and all(len(c.read()) == 0 for c in chunks)
    empty = write_text(tmp_path / "zero.txt", "")
    assert [len(c.read()) for c in open_edge_file(empty).edge_chunks(10)] == [0]


@pytest.mark.parametrize(
    "text",
    ['0 1\n2 3 "note\n4 5\n6 7 end"\n8 9\n', '0 1 1.0\n2 3 1.0 "note\n4 5 1.0\n6 7 1.0 end"\n8 9 1.0\n'],
)
def test_a_quote_in_an_ignored_column_swallows_no_line(tmp_path: Path, text: str) -> None:
    got = read_all(open_edge_file(write_text(tmp_path / "q.txt", text)), tmp_path / "work")
    assert multiset(*got) == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]


def test_a_quoted_id_is_named_as_any_other_token(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "q.txt", '0 1\n"2" 3\n'), tmp_path)
    assert error.line == 2 and "got '\"2\"'" in error.problem


def test_a_byte_order_mark_is_blank(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf0,1,2.5\r\n1,2,1.0\r\n")
    source = open_edge_file(str(path))
    assert multiset(*read_all(source, tmp_path / "work")) == [(0, 1), (1, 2)]


def test_lines_ending_in_a_lone_carriage_return_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "mac.txt"
    path.write_bytes(b"0 1\r1 2\r2 3\r")
    with pytest.raises(InputError, match=r"mac\.txt: lines end in a lone carriage return \(\\r\); expected"):
        open_edge_file(str(path)).edge_chunks(10)


def test_digits_grouped_by_underscores_are_named(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "u.txt", "0 1\n1_000 2\n"), tmp_path)
    assert error.line == 2 and "got '1_000'" in error.problem


def test_non_integer_token_names_its_line(tmp_path: Path) -> None:
    path = write_text(tmp_path / "bad.txt", "# c1\n% c2\n0 1\n\n2 abc\n3 4\n")
    error = first_error(path, tmp_path)
    assert error.line == 5 and "expected two integer node ids, got 'abc'" in str(error)
    assert error.where == path


def test_a_header_line_is_named_with_a_hint(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "h.csv", "# made by hand\nsrc,dst\n0,1\n"), tmp_path)
    assert error.line == 2 and error.problem == (
        "expected two integer node ids, got 'src' (a header line? make it a comment: start it with '#')"
    )
    error = first_error(write_text(tmp_path / "n.csv", "0,x\n0,1\n"), tmp_path)
    assert error.problem == "expected two integer node ids, got 'x'"


def test_true_and_false_are_not_node_ids(tmp_path: Path) -> None:
    """Lines of True/False words used to be read as edges between nodes 1 and 0."""
    error = first_error(write_text(tmp_path / "b.txt", "True False\ntrue TRUE\n"), tmp_path)
    assert error.line == 1 and error.problem.startswith("expected two integer node ids, got 'True'")


def test_bad_token_line_in_a_later_chunk(tmp_path: Path) -> None:
    lines = ["# c"] + [f"{i} {i + 1}" for i in range(300)]
    lines[250] = "7 1.5"
    path = write_text(tmp_path / "bad.txt", "\n".join(lines) + "\n")
    error = first_error(path, tmp_path, edges_per_chunk=20)
    assert error.line == 251 and "'1.5'" in error.problem


def test_one_column_line(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "bad.txt", "0 1\n5\n"), tmp_path)
    assert error.line == 2 and "got only '5'" in error.problem


def test_nan_weight(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "w.txt", "# w\n0 1 0.5\n1 2 nan\n"), tmp_path)
    assert error.line == 3 and "not a finite number" in error.problem


def test_missing_weight(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "w.txt", "0 1 0.5\n1 2\n"), tmp_path)
    assert error.line == 2 and "weight" in error.problem


def test_negative_id(tmp_path: Path) -> None:
    error = first_error(write_text(tmp_path / "neg.txt", "# c\n0 1\n-3 2\n"), tmp_path)
    assert error.line == 3 and "negative source node id -3" in error.problem


def test_id_beyond_declared_node_count(tmp_path: Path) -> None:
    path = write_text(tmp_path / "big.txt", "0 1\n\n# c\n2 7\n")
    source = open_edge_file(path, num_nodes=4)
    assert source.num_nodes() == 4
    [block] = [chunk.read() for chunk in source.edge_chunks(100)]
    with pytest.raises(InputError) as info:
        check_edge_ids(block, source.num_nodes())
    assert info.value.line == 4 and "destination node id 7 is >= the declared node count 4" in str(info.value)


def test_truncated_gzip(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    data = gzip.compress(edge_text(src, dst).encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated gzip") as info:
        open_edge_file(str(path)).prepare(str(tmp_path / "work"))
    assert info.value.where == str(path)
    assert not list((tmp_path / "work").iterdir())


def test_gzip_content_without_gz_name(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_bytes(gzip.compress(b"0 1\n1 2\n"))
    assert multiset(*read_all(open_edge_file(str(path)), tmp_path / "work")) == [(0, 1), (1, 2)]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        open_edge_file(str(tmp_path / "nope.txt"))
