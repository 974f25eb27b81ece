"""Whole per-node arrays (labels, splits) read from .npy, .npz or text, with errors that locate entries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, load_array
from gtool.preprocess.sources.fileinfo import check_readable
from gtool.preprocess.sources.npzmember import npz_keys
from gtool.preprocess.sources.text.parse import (
    FAST_PATH_ERRORS,
    data_lines,
    find_bad_line,
    line_of_row,
    normalize,
    read_columns,
    show,
)

FLOAT = np.dtype(np.float64)


@dataclass(frozen=True)
class NodeValues:
    """A per-node array read from `file`, and how to name where entry (row[, col]) came from."""

    values: np.ndarray
    file: str
    name: str = "array"
    text: bytes | None = None

    def error(self, position: tuple[int, ...], problem: str) -> InputError:
        """An InputError naming the array index, or for text the line (and column) of an entry."""
        if self.text is None:
            return InputError(self.file, problem, index=f"{self.name}[{', '.join(map(str, position))}]")
        column = f"column {position[1] + 1}" if len(position) > 1 else None
        return InputError(self.file, problem, line=line_of_row(self.text, position[0]) + 1, index=column)

    def fail_first(self, bad: np.ndarray, problem: Callable[[Any], str]) -> None:
        """Raise for the first entry where mask `bad` is set, if any; `problem` words it from the value."""
        if bad.any():
            position = tuple(int(i) for i in np.argwhere(bad)[0])
            raise self.error(position, problem(self.values[position]))

    def squeezed(self) -> NodeValues:
        """A single-column (N, 1) array as (N,)."""
        if self.values.ndim == 2 and self.values.shape[1] == 1:
            return NodeValues(self.values[:, 0], self.file, self.name, self.text)
        return self

    def check_rows(self, num_nodes: int) -> None:
        """Fail unless there is one row per node."""
        rows = self.values.shape[0] if self.values.ndim else 1
        if rows != num_nodes:
            raise InputError(self.file, f"{rows} rows, expected {num_nodes} nodes")


def pick_key(path: str, preferred: tuple[str, ...]) -> str:
    """The .npz array to use: the only one, or the first of `preferred` present."""
    keys = npz_keys(path)
    if len(keys) == 1:
        return keys[0]
    for key in preferred:
        if key in keys:
            return key
    wanted = " or ".join(f"'{key}'" for key in preferred)
    raise InputError(
        path, f"expected a single array or one named {wanted}; found: {', '.join(keys) or 'none'}"
    )


def text_problem(width: int) -> Callable[[list[bytes]], str | None]:
    """Line check of a text node file: `width` numbers per line ('nan' allowed)."""

    def check(tokens: list[bytes]) -> str | None:
        if len(tokens) < width:
            return f"expected {width} numbers per line as on the first line, got {len(tokens)}"
        for token in tokens[:width]:
            try:
                float(token)
            except ValueError:
                return f"expected a number, got '{show(token)}'"
        return None

    return check


def read_text_values(path: str, words: bool) -> NodeValues:
    """A text node file: one line per node of numbers (or, if `words`, of one word each)."""
    with open(path, "rb") as f:
        data = normalize(f.read())
    first = next(data_lines(data), None)
    width = len(first[1]) if first else 1
    try:
        columns = read_columns(data, [FLOAT] * width)
    except FAST_PATH_ERRORS as exc:
        if words and width == 1:
            return NodeValues(np.array([tokens[0] for _, tokens in data_lines(data)]), path, text=data)
        bad = find_bad_line(data, text_problem(width))
        if bad is None:
            raise InputError(path, f"cannot parse: {exc}") from None
        raise InputError(path, bad[1], line=bad[0] + 1) from None
    values = columns[0] if width == 1 else np.stack(columns, axis=1)
    return NodeValues(values, path, text=data)


def read_node_values(path: str, keys: tuple[str, ...], words: bool = False) -> NodeValues:
    """Per-node values of a .npy, an .npz (the only array or the first of `keys`) or a text file."""
    check_readable(path)
    lower = path.lower()
    if lower.endswith(".npy"):
        return NodeValues(load_array(ArrayRef(path)), path)
    if lower.endswith(".npz"):
        key = pick_key(path, keys)
        return NodeValues(load_array(ArrayRef(path, key)), path, key)
    return read_text_values(path, words)
