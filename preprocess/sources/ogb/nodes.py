"""OGB node and edge counts, labels (NaN -> unlabelled; or N x K binary tasks, NaN -> unknown) and the
official split as int8 codes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef
from gtool.preprocess.sources.npzmember import NpzMember
from gtool.preprocess.sources.ogb.csvfiles import iter_csv_blocks, read_csv_column
from gtool.preprocess.sources.ogb.pt import load_pt
from gtool.store import layout

FLAT_CHUNK = 1 << 22
Locate = Callable[[int], tuple[int | None, str | None]]


def csv_line(i: int) -> tuple[int | None, str | None]:
    """Value i of a one-value-per-line file is on line i + 1."""
    return i + 1, None


def array_index(name: str, offset: int = 0) -> Locate:
    """Value i of array `name` (from element `offset` on)."""
    return lambda i: (None, f"{name}[{offset + i}]")


def fail_at(where: str, locate: Locate, i: int, problem: str) -> InputError:
    """An InputError at value i, located by `locate`."""
    line, index = locate(i)
    return InputError(where, problem, line=line, index=index)


def read_npz_column(path: str, key: str) -> np.ndarray:
    """A small 1D (or N x 1) .npz member, streamed out of the archive."""
    member = NpzMember(path, key)
    if len(member.shape) > 2 or (len(member.shape) == 2 and member.shape[1] != 1):
        raise InputError(member.where, f"expected a vector (shape (N,) or (N, 1)), got shape {member.shape}")
    parts = list(member.iter_flat(FLAT_CHUNK))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=member.dtype)


def single_count(values: np.ndarray, where: str, what: str, locate: Locate) -> int:
    """The one entry of num-node-list / num-edge-list (a node-property dataset holds one graph)."""
    if values.shape[0] != 1:
        raise InputError(where, f"{values.shape[0]} entries; expected one {what} count (one graph)")
    if values.dtype.kind not in "iu" or values[0] < 0:
        raise fail_at(where, locate, 0, f"expected a non-negative integer {what} count, got {values[0]}")
    return int(values[0])


def read_counts(raw: Path, binary: bool) -> tuple[int, int]:
    """(num_nodes, num_edges) from raw/data.npz or raw/num-{node,edge}-list.csv.gz."""
    if binary:
        data = str(raw / "data.npz")
        nodes, edges = (
            single_count(read_npz_column(data, key), f"{data}[{key}]", what, array_index(key))
            for key, what in (("num_nodes_list", "node"), ("num_edges_list", "edge"))
        )
    else:
        nodes, edges = (
            single_count(read_csv_column(str(raw / name), integer=True), str(raw / name), what, csv_line)
            for name, what in (("num-node-list.csv.gz", "node"), ("num-edge-list.csv.gz", "edge"))
        )
    return nodes, edges


def to_labels(values: np.ndarray, where: str, locate: Locate) -> np.ndarray:
    """int64 class ids, NaN -> LABEL_NONE; InputError at the first value that is no class id."""
    if values.dtype.kind == "f":
        missing = np.isnan(values)
        filled = np.where(missing, float(layout.LABEL_NONE), values)
        bad = ~missing & (~np.isfinite(filled) | (filled < 0) | (filled != np.floor(filled)))
    elif values.dtype.kind in "iub":
        filled, bad = values, values < 0
    else:
        raise InputError(where, f"expected numeric labels, got dtype {values.dtype}")
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        problem = f"label {values[i]} is no class id (expected an integer >= 0, or NaN for none)"
        raise fail_at(where, locate, i, problem)
    return filled.astype(np.int64)


def read_labels(labels: ArrayRef | str, num_nodes: int, num_classes: int | None) -> np.ndarray:
    """Labels from `node_label` of node-label.npz (N x 1, NaN = unlabelled; or its extracted copy), or
    from node-label.csv.gz (a path)."""
    if isinstance(labels, str):
        values = read_csv_column(labels, integer=True, allow_nan=True)
        if values.shape[0] != num_nodes:
            raise InputError(labels, f"{values.shape[0]} lines, expected one label per node ({num_nodes})")
        return check_classes(to_labels(values, labels, csv_line), num_classes, labels, csv_line)
    shape, _ = labels.header()
    if shape not in ((num_nodes,), (num_nodes, 1)):
        expected = f"expected shape ({num_nodes}, 1): one label per node"
        raise InputError(labels.where, f"{expected}, got {shape}")
    out = np.empty(num_nodes, dtype=np.int64)
    done = 0
    for flat in labels.iter_flat(FLAT_CHUNK):
        locate = array_index("node_label", done)
        out[done : done + flat.shape[0]] = to_labels(flat, labels.where, locate)
        done += flat.shape[0]
    return check_classes(out, num_classes, labels.where, array_index("node_label"))


def to_task_labels(values: np.ndarray, where: str, locate: Locate, first: int) -> np.ndarray:
    """int64 rows of K binary task labels (1, 0; -1 or NaN: unknown -> LABEL_NONE), InputError at the
    first entry that is none of these; entry (i, k) is value first * K + i * K + k of the file's order."""
    if values.dtype.kind not in "biuf":
        raise InputError(where, f"expected numeric task labels, got dtype {values.dtype}")
    unknown = np.isnan(values) if values.dtype.kind == "f" else np.zeros(values.shape, dtype=bool)
    unknown |= values == layout.LABEL_NONE
    bad = ~unknown & (values != 0) & (values != 1)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        problem = f"task label {values[row, column]} is not 0 or 1 (or NaN or -1 for unknown)"
        raise fail_at(where, locate, (first + row) * values.shape[1] + column, problem)
    return np.where(unknown, layout.LABEL_NONE, values).astype(np.int64)


def read_task_labels(labels: ArrayRef | str, num_nodes: int, tasks: int) -> np.ndarray:
    """N x K binary task labels (multi-label, ogbn-proteins) from `node_label` of node-label.npz (N x K; or
    its extracted copy) or from node-label.csv.gz (a path: K comma-separated values per line)."""
    out = np.empty((num_nodes, tasks), dtype=np.int64)
    done = 0
    if isinstance(labels, str):
        for line, block in iter_csv_blocks(labels, tasks, integer=True, allow_nan=True):
            if done + len(block) > num_nodes:
                raise InputError(
                    labels, f"more lines than the {num_nodes} nodes", line=line + num_nodes - done
                )
            out[done : done + len(block)] = to_task_labels(block, labels, task_line(tasks), done)
            done += len(block)
        if done != num_nodes:
            raise InputError(labels, f"{done} lines, expected one line of {tasks} task labels per node")
        return out
    shape, _ = labels.header()
    if shape != (num_nodes, tasks):
        raise InputError(
            labels.where, f"expected shape ({num_nodes}, {tasks}): {tasks} tasks per node, got {shape}"
        )
    for flat in labels.iter_flat(FLAT_CHUNK - FLAT_CHUNK % tasks):
        rows = flat.reshape(-1, tasks)
        out[done : done + len(rows)] = to_task_labels(rows, labels.where, task_index(tasks), done)
        done += len(rows)
    return out


def task_line(tasks: int) -> Locate:
    """Value i of a file of `tasks` values per line: its line and column."""
    return lambda i: (i // tasks + 1, f"column {i % tasks + 1}")


def task_index(tasks: int) -> Locate:
    """Value i of node_label (N x tasks): its index."""
    return lambda i: (None, f"node_label[{i // tasks}, {i % tasks}]")


def check_classes(labels: np.ndarray, num_classes: int | None, where: str, locate: Locate) -> np.ndarray:
    """`labels`, after checking that they are below the declared class count (if any)."""
    if num_classes is not None and labels.max(initial=-1) >= num_classes:
        k = int(np.argmax(labels >= num_classes))
        problem = f"label {labels[k]} is >= the {num_classes} classes the dataset declares"
        raise fail_at(where, locate, k, problem)
    return labels


def split_parts(split_dir: Path) -> list[tuple[str, str, np.ndarray, Locate]]:
    """(split name, file, node ids, locate) for train/valid/test of an OGB split folder."""
    csvs = [split_dir / f"{name}.csv.gz" for name in layout.SPLIT_CODES]
    if all(p.is_file() for p in csvs):
        return [
            (name, str(p), read_csv_column(str(p), integer=True), csv_line)
            for name, p in zip(layout.SPLIT_CODES, csvs, strict=True)
        ]
    pt = split_dir / "split_dict.pt"
    if not pt.is_file():
        expected = "expected train.csv.gz, valid.csv.gz and test.csv.gz (or split_dict.pt)"
        raise InputError(str(split_dir), expected)
    loaded = load_pt(str(pt))
    if not isinstance(loaded, dict) or not all(name in loaded for name in layout.SPLIT_CODES):
        raise InputError(str(pt), "expected a dict with 'train', 'valid' and 'test' arrays of node ids")
    return [
        (name, str(pt), np.asarray(loaded[name]).reshape(-1), array_index(f"['{name}']"))
        for name in layout.SPLIT_CODES
    ]


def read_split(split_dir: Path, num_nodes: int) -> np.ndarray:
    """int8 codes per node (0 train, 1 valid, 2 test, -1 none) from an OGB split folder."""
    split = np.full(num_nodes, layout.SPLIT_NONE, dtype=np.int8)
    names = {code: name for name, code in layout.SPLIT_CODES.items()}
    for name, where, ids, locate in split_parts(split_dir):
        if ids.dtype.kind not in "iu":
            raise InputError(where, f"{name}: expected integer node ids, got dtype {ids.dtype}")
        outside = np.flatnonzero((ids < 0) | (ids >= num_nodes))
        if outside.size:
            i = int(outside[0])
            raise fail_at(where, locate, i, f"node id {ids[i]} out of range (expected 0 <= id < {num_nodes})")
        taken = np.flatnonzero(split[ids] != layout.SPLIT_NONE)
        if taken.size:
            i = int(taken[0])
            other = names[int(split[ids[i]])]
            raise fail_at(where, locate, i, f"node {ids[i]} is in both the {other} and the {name} split")
        split[ids] = layout.SPLIT_CODES[name]
    return split
