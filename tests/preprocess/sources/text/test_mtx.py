"""Matrix Market sources: 1-based coordinates, symmetric mirroring, size checks and format errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gtool.cli.main import app
from gtool.errors import InputError
from gtool.preprocess.sources.edgefiles import open_edge_file
from gtool.preprocess.sources.text import file as textfile
from gtool.preprocess.sources.text.parse import data_lines, normalize
from tests.preprocess.sources.helpers import multiset, read_all, rmat_edges

PATTERN = "%%MatrixMarket matrix coordinate pattern general\n"


def write_mtx(path: Path, header: str, body: str) -> str:
    path.write_text(header + body)
    return str(path)


def test_round_trip_general_pattern(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    body = f"% a comment\n\n256 256 {len(src)}\n" + "".join(
        f"{s + 1} {d + 1}\n" for s, d in zip(src.tolist(), dst.tolist(), strict=True)
    )
    source = open_edge_file(write_mtx(tmp_path / "g.mtx", PATTERN, body))
    assert source.num_nodes() == 256
    assert multiset(*read_all(source, tmp_path / "work", 100)) == multiset(src, dst)
    assert source.describe()["symmetry"] == "general"


def test_a_byte_order_mark_before_the_banner_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "g.mtx"
    path.write_bytes(b"\xef\xbb\xbf" + f"{PATTERN.strip()}\r\n3 3 2\r\n1 2\r\n2 3\r\n".encode())
    assert multiset(*read_all(open_edge_file(str(path)), tmp_path / "work")) == [(0, 1), (1, 2)]


def test_symmetric_real_gzipped_is_mirrored(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 0.5\n3 3 1.0\n3 1 -2\n"
    path = tmp_path / "s.mtx.gz"
    path.write_bytes(gzip.compress(text.encode()))
    source = open_edge_file(str(path))
    assert multiset(*read_all(source, tmp_path / "work")) == [(0, 1), (0, 2), (1, 0), (2, 0), (2, 2)]


def test_declared_count_overrides_size_line(tmp_path: Path) -> None:
    source = open_edge_file(write_mtx(tmp_path / "g.mtx", PATTERN, "4 4 1\n1 2\n"), num_nodes=10)
    assert source.num_nodes() == 10


def test_array_format_is_refused(tmp_path: Path) -> None:
    path = write_mtx(tmp_path / "a.mtx", "%%MatrixMarket matrix array real general\n", "2 2\n1\n2\n3\n4\n")
    with pytest.raises(InputError, match="'array' format") as info:
        open_edge_file(path)
    assert info.value.line == 1 and info.value.where == path


def test_entry_beyond_size_names_its_line(tmp_path: Path) -> None:
    path = write_mtx(tmp_path / "g.mtx", PATTERN, "% c\n3 3 2\n1 2\n2 4\n")
    with pytest.raises(InputError, match=r"column index 4 is outside 1\.\.3") as info:
        read_all(open_edge_file(path), tmp_path / "work")
    assert info.value.line == 5


def test_zero_index_is_refused(tmp_path: Path) -> None:
    path = write_mtx(tmp_path / "g.mtx", PATTERN, "3 3 1\n0 2\n")
    with pytest.raises(InputError, match="row index 0") as info:
        read_all(open_edge_file(path), tmp_path / "work")
    assert info.value.line == 3


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        ("%%MatrixMarket matrix coordinate pattern general\n", "3 4 1\n1 2\n", "not square"),
        ("%%MatrixMarket matrix coordinate complex general\n", "2 2 1\n1 2 1 0\n", "not supported"),
        ("%MatrixMarket nonsense\n", "2 2 1\n", "banner"),
        ("%%MatrixMarket matrix coordinate pattern general\n", "% only comments\n", "no size line"),
        ("%%MatrixMarket matrix coordinate pattern general\n", "2 two 1\n", "size line"),
    ],
)
def test_header_errors(tmp_path: Path, header: str, body: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        open_edge_file(write_mtx(tmp_path / "g.mtx", header, body))


def test_missing_value_in_real_matrix(tmp_path: Path) -> None:
    path = write_mtx(
        tmp_path / "g.mtx", "%%MatrixMarket matrix coordinate real general\n", "2 2 2\n1 2 1.0\n2 1\n"
    )
    with pytest.raises(InputError, match="weight") as info:
        read_all(open_edge_file(path), tmp_path / "work")
    assert info.value.line == 4


@pytest.mark.parametrize(("body", "found"), [("3 3 3\n1 2\n2 3\n", 2), ("3 3 1\n1 2\n\n% c\n2 3\n", 2)])
def test_entry_count_must_match_the_size_line(tmp_path: Path, body: str, found: int) -> None:
    path = write_mtx(tmp_path / "g.mtx", PATTERN, "% c\n" + body)
    declared = body.split("\n")[0].split()[2]
    with pytest.raises(InputError, match=f"declares {declared} entries but the file holds {found}") as info:
        open_edge_file(path).prepare(str(tmp_path / "work"))
    assert info.value.where == path and info.value.line == 3


def test_truncated_gzipped_mtx_names_the_file(tmp_path: Path) -> None:
    src, dst = rmat_edges()
    body = f"256 256 {len(src)}\n" + "".join(f"{s + 1} {d + 1}\n" for s, d in zip(src, dst, strict=True))
    data = gzip.compress((PATTERN + body).encode())
    path = tmp_path / "cut.mtx.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(InputError, match="truncated gzip") as info:
        open_edge_file(str(path)).prepare(str(tmp_path / "work"))
    assert info.value.where == str(path)


def test_data_line_count_matches_the_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "  1 2\r\n\n% c\n\t3,4 # x\n  # only\n , \n5 6\n7 8"
    path = tmp_path / "t.txt"
    path.write_text(text)
    assert textfile.count_data_lines(str(path), 0) == 4
    assert textfile.count_data_lines(str(path), text.index("3,4")) == 3
    rng = np.random.default_rng(0)
    lines = np.array(["1 2", "  3 4", "%c", "# c", "", " ", "5,6", "\t7 8", "9 9 % x", "\r", "1 1\r", "2 3"])
    for _ in range(100):
        text = "\n".join(rng.choice(lines, rng.integers(0, 20))) + rng.choice(["", "\n", " "])
        path.write_text(text)
        want = sum(1 for _ in data_lines(normalize(text.encode())))
        for piece_bytes in (1, 3, 8, 1 << 20):
            monkeypatch.setattr(textfile, "COPY_BYTES", piece_bytes)
            assert textfile.count_data_lines(str(path), 0) == want, (text, piece_bytes)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (
            f"{PATTERN}3 3 2\n1 2\r2 3\r",
            [],
            "g.mtx: lines end in a lone carriage return (\\r); expected \\n or",
        ),
        (PATTERN.replace("\n", "\r") + "3 3 2\r1 2\r2 3\r", [], "g.mtx: lines end in a lone carriage return"),
        (
            f"{PATTERN}6 6 2\n1 2\n5 6\n",
            ["--num-nodes", "4"],
            "g.mtx, line 4: row index 5 is outside 1..4 declared by --num-nodes (the size line declares 6)",
        ),
    ],
    ids=["cr-entries", "cr-everywhere", "num-nodes-below-size"],
)
def test_gtool_shard_says_what_the_file_holds(
    tmp_path: Path, content: str, args: list[str], message: str
) -> None:
    """Lone carriage returns were reported as a truncated file, and an id beyond --num-nodes 0-based."""
    path = tmp_path / "g.mtx"
    path.write_bytes(content.encode())
    out = tmp_path / "s.zarr"
    result = CliRunner().invoke(
        app, ["shard", str(path), *args, "-o", str(out), "-q", "-w", "1"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {tmp_path / message}"), result.output
    assert "truncated" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.mtx"]
