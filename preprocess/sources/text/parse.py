"""Parsing blocks of whitespace- or comma-separated text: a fast vectorized path and an exact slow scan.

Both paths read the same language: ',' separates like whitespace, '#' and '%' start a comment that runs
to the end of the line, blank lines are skipped, and columns beyond the ones asked for are ignored. A
quote is a character like any other (no quoted fields, which could run over line ends and swallow the lines
in between), and a UTF-8 byte-order mark at the start of a file is blank. The
fast path (pandas' C tokenizer) parses a whole block; when it fails, the slow scan walks the block line
by line to name the first bad line and what is wrong with it.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

NORMALIZE = bytes.maketrans(b",%", b" #")
COMMENT = re.compile(rb"#[^\n]*")
FAST_PATH_ERRORS = (ValueError, OverflowError, pd.errors.ParserWarning)
BYTE_ORDER_MARK = b"\xef\xbb\xbf"
TRUTH_WORD = re.compile(rb"(?<!\S)(?:true|false)(?!\S)", re.IGNORECASE)
"""A token pandas would read as a boolean (1 or 0) in a column of them: never a number here."""

LineCheck = Callable[[list[bytes]], str | None]


def normalize(data: bytes) -> bytes:
    """Commas to spaces, comments and a leading byte-order mark blanked, so that only whitespace separates
    tokens."""
    if data.startswith(BYTE_ORDER_MARK):
        data = b" " * len(BYTE_ORDER_MARK) + data[len(BYTE_ORDER_MARK) :]
    data = data.translate(NORMALIZE)
    return COMMENT.sub(b"", data) if b"#" in data else data


def read_columns(data: bytes, dtypes: list[np.dtype]) -> list[np.ndarray]:
    """The first len(dtypes) columns of normalized `data`; raises one of FAST_PATH_ERRORS on bad input
    (True/False words too, which pandas would turn into 1/0 in a column holding nothing else)."""
    if not data or data.isspace():
        return [np.empty(0, dtype=dtype) for dtype in dtypes]
    if any(letter in data for letter in b"rRsS") and (word := TRUTH_WORD.search(data)):
        raise ValueError(f"'{word.group().decode('latin-1')}' is not a number")
    names = list(range(len(dtypes)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        frame = pd.read_csv(
            io.BytesIO(data),
            sep=r"\s+",
            header=None,
            names=names,
            usecols=names,
            index_col=False,
            dtype=dict(zip(names, dtypes, strict=True)),
            encoding="latin-1",
            quoting=csv.QUOTE_NONE,
        )
    return [frame[name].to_numpy(dtype=dtype) for name, dtype in zip(names, dtypes, strict=True)]


def data_lines(data: bytes) -> Iterator[tuple[int, list[bytes]]]:
    """(0-based line index, tokens) of each non-blank line of normalized `data`."""
    for index, line in enumerate(data.split(b"\n")):
        tokens = line.split()
        if tokens:
            yield index, tokens


def find_bad_line(data: bytes, check: LineCheck) -> tuple[int, str] | None:
    """(line index, problem) of the first line of normalized `data` whose tokens `check` rejects."""
    for index, tokens in data_lines(data):
        problem = check(tokens)
        if problem is not None:
            return index, problem
    return None


def line_of_row(data: bytes, row: int) -> int:
    """0-based line index in normalized `data` of its `row`-th data (non-blank) line."""
    for count, (index, _) in enumerate(data_lines(data)):
        if count == row:
            return index
    raise IndexError(f"the block has no data row {row}")


def show(token: bytes) -> str:
    """A token as text for a message."""
    return token.decode("utf-8", "backslashreplace")


def whole_number(token: bytes) -> int:
    """The integer a token spells (whole floats like '4.0' allowed, as the fast path allows them; digits
    grouped by '_', which Python reads and the fast path does not, are not)."""
    if b"_" in token:
        raise ValueError(f"not a number: {show(token)}")
    try:
        return int(token)
    except ValueError:
        value = float(token)
        if not value.is_integer():
            raise
        return int(value)


def is_header(tokens: list[bytes]) -> bool:
    """Whether a line of tokens looks like a header of column names: none of them is a number."""
    for token in tokens:
        try:
            float(token)
        except ValueError:
            continue
        return False
    return True


def float_problem(token: bytes, what: str) -> str | None:
    """Why `token` is not a finite number, or None."""
    try:
        value = float(token)
    except ValueError:
        return f"expected a number as {what}, got '{show(token)}'"
    return None if np.isfinite(value) else f"{what} '{show(token)}' is not a finite number"


def edge_line_check(weighted: bool) -> LineCheck:
    """The line check of an edge list: two int64 node ids, and a finite weight in column 3 if weighted."""

    def check(tokens: list[bytes]) -> str | None:
        if len(tokens) < 2:
            return f"expected two integer node ids, got only '{show(tokens[0])}'"
        for token in tokens[:2]:
            try:
                value = whole_number(token)
            except ValueError:
                return f"expected two integer node ids, got '{show(token)}'"
            if not -(2**63) <= value < 2**63:
                return f"node id {show(token)} does not fit in 64 bits"
        if not weighted:
            return None
        if len(tokens) < 3:
            return "expected a weight in column 3 (the file's first edge line has one), got none"
        return float_problem(tokens[2], "the weight in column 3")

    return check
