"""Chunked readers of OGB's headerless numeric .csv.gz files, with errors that name the line."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import pandas as pd

from gtool.errors import InputError

BLOCK_BYTES = 64 << 20
NOT_TEXT = "expected comma-separated numbers as UTF-8 text, found other bytes"
_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def first_line_values(path: str) -> int:
    """Number of comma-separated values on the first line of a (gzipped) CSV file (0 if it is empty)."""
    try:
        with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
            first = f.readline().decode().strip()
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"cannot read the file ({e})") from None
    except UnicodeDecodeError:
        raise InputError(path, NOT_TEXT, line=1) from None
    return first.count(",") + 1 if first else 0


def count_columns(path: str) -> int:
    """Number of comma-separated values on the first line of a (gzipped) CSV file, which must have some."""
    columns = first_line_values(path)
    if not columns:
        raise InputError(path, "expected comma-separated numbers, found an empty first line", line=1)
    return columns


def check_first_line(path: str, columns: int) -> None:
    """Fail when the first line has more values than `columns` (pandas would drop the extra ones: a
    3-column edge list read as 2 columns loses its third silently); fewer are caught as missing values."""
    found = first_line_values(path)
    if found > columns:
        wanted = "one value per line" if columns == 1 else f"{columns} comma-separated values per line"
        raise InputError(path, f"expected {wanted}, found {found} comma-separated values", line=1)


def _check_rows(bad: np.ndarray, path: str, line: int, problem: str) -> None:
    """InputError at the first row where the rows x columns mask `bad` has a True."""
    rows = np.flatnonzero(bad.any(axis=1))
    if rows.size:
        raise InputError(path, problem, line=line + int(rows[0]))


def _numeric_block(
    frame: pd.DataFrame, path: str, line: int, *, integer: bool, allow_nan: bool
) -> np.ndarray:
    """The frame as a numeric array, or InputError at the first value that is not a number as asked."""
    values = frame.to_numpy()
    if values.dtype.kind not in "iuf":
        coerced = frame.apply(pd.to_numeric, errors="coerce")
        _check_rows(coerced.isna().to_numpy() & frame.notna().to_numpy(), path, line, "expected a number")
        values = coerced.to_numpy(dtype=np.float64)
    if values.dtype.kind != "f":
        return values.astype(np.int64 if integer else np.float64)
    missing = np.isnan(values)
    if not allow_nan:
        _check_rows(missing, path, line, "missing value (expected a number)")
    if not integer:
        return values
    fractional = ~missing & (values != np.floor(np.where(missing, 0.0, values)))
    _check_rows(fractional, path, line, "expected an integer")
    return values if missing.any() else values.astype(np.int64)


def iter_csv_blocks(
    path: str, columns: int, *, integer: bool, allow_nan: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    """(line number of the block's first row, rows x columns block) for consecutive blocks of the file.

    Integer files come back as int64 (float64 when `allow_nan` and a block has missing values), others
    as float64; a malformed value, or a line of more or fewer values, raises InputError naming the file and
    line.
    """
    check_first_line(path, columns)
    rows = max(1, BLOCK_BYTES // (8 * columns))
    line = 1
    try:
        reader = pd.read_csv(
            path,
            header=None,
            names=list(range(columns)),
            index_col=False,
            chunksize=rows,
            skip_blank_lines=False,
            compression="infer",
        )
        for frame in reader:
            yield line, _numeric_block(frame, path, line, integer=integer, allow_nan=allow_nan)
            line += len(frame)
    except pd.errors.EmptyDataError:
        return
    except pd.errors.ParserError as e:
        found = _FIELDS.search(str(e))
        if found is None:
            raise InputError(path, f"malformed CSV ({e})", line=line) from None
        expected, at, saw = (int(g) for g in found.groups())
        raise InputError(path, f"expected {expected} comma-separated values, found {saw}", line=at) from None
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(path, f"cannot read the file ({e})", line=line) from None
    except UnicodeDecodeError:
        raise InputError(path, f"{NOT_TEXT} (on line {line} or later)") from None


def read_csv_column(path: str, *, integer: bool, allow_nan: bool = False) -> np.ndarray:
    """A one-value-per-line file as a 1D array (value i is on line i + 1: blank lines are refused)."""
    parts = [block[:, 0] for _, block in iter_csv_blocks(path, 1, integer=integer, allow_nan=allow_nan)]
    if not parts:
        return np.zeros(0, dtype=np.int64 if integer else np.float64)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def npy_from_csv(
    src: str, shape: tuple[int, int], dtype: type, *, expected: str, edges: bool = False
) -> Callable[[BinaryIO], None]:
    """What streams a rows x columns CSV as a .npy file into an open file (for an atomic write).

    An edge list (`edges`, an E x 2 CSV) is stored as a Fortran-order 2 x E array: the same bytes, read
    as edge_index[0] (sources) and edge_index[1] (destinations) like OGB's binary form. `expected` says
    where the row count comes from, for the error when the file has another.
    """
    rows, columns = shape
    integer = np.dtype(dtype).kind in "iu"
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": edges,
        "shape": (columns, rows) if edges else shape,
    }

    def write(out: BinaryIO) -> None:
        np.lib.format.write_array_header_1_0(out, header)
        done = 0
        for line, block in iter_csv_blocks(src, columns, integer=integer):
            if done + len(block) > rows:
                raise InputError(src, f"more lines than the {rows} {expected}", line=line + rows - done)
            out.write(np.ascontiguousarray(block, dtype=dtype).tobytes())
            done += len(block)
        if done != rows:
            raise InputError(src, f"{done} lines, expected {rows} ({expected})")

    return write
