"""User-given node files: features (out of core), labels and the train/valid/test split."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.arrayfiles import ArrayRef, as_node_ids, check_kind, load_array
from gtool.preprocess.sources.base import FeatureSource, refuse_non_finite
from gtool.preprocess.sources.fileinfo import READ_BYTES, check_readable
from gtool.preprocess.sources.nodes.values import NodeValues, pick_key, read_node_values
from gtool.preprocess.sources.npzmember import npz_keys
from gtool.preprocess.sources.sparse.csrfeatures import CsrFeatures
from gtool.preprocess.sources.sparse.scipynpz import SCIPY_KEYS, read_format

FEATURE_KEYS = ("node_feat", "features", "x")
LABEL_KEYS = ("node_label", "labels", "label", "y")
SPLIT_KEYS = ("split",)
SPLIT_SETS = (
    ("train", 0),
    ("valid", 1),
    ("val", 1),
    ("test", 2),
    ("train_mask", 0),
    ("val_mask", 1),
    ("valid_mask", 1),
    ("test_mask", 2),
)
"""Members of an .npz that name the nodes of a split (node index arrays or masks), and its code."""
MASK_KEYS = ("train_mask", "val_mask", "test_mask")
MASK_FORM = "bool arrays train, valid, test (or train_mask, val_mask, test_mask) of an .npz"
SPLIT_WORDS = {
    "train": 0,
    "valid": 1,
    "val": 1,
    "test": 2,
    "": -1,
    "none": -1,
    "0": 0,
    "1": 1,
    "2": 2,
    "-1": -1,
}
UNKNOWN = -2


class FeatureArray(FeatureSource):
    """Features in a memory-mapped 1-D or 2-D numeric array (.npy, or an .npz member), read by rows."""

    on_disk = True

    def __init__(self, ref: ArrayRef):
        shape, dtype = ref.header()
        check_kind(dtype, ref.where, "numeric features", "biuf")
        if len(shape) not in (1, 2):
            raise InputError(ref.where, f"expected a (nodes x features) array, got shape {shape}")
        self.ref, self.where, self.dtype = ref, ref.where, dtype
        self.rows = shape[0]
        self.num_features = shape[1] if len(shape) == 2 else 1

    @property
    def num_rows(self) -> int:
        return self.rows

    def prepare(self, workdir: str) -> None:
        self.ref = self.ref.prepared(workdir)

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        arr = self.ref.open()
        arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
        out = np.empty((len(rows), self.num_features), dtype=np.float32)
        step = max(1, READ_BYTES // max(1, self.num_features * self.dtype.itemsize))
        for start in range(0, len(rows), step):
            part = out[start : start + step]
            block = rows[start : start + step]
            part[...] = arr[block]
            refuse_non_finite(part, self.ref.file, functools.partial(self.locate, block))
        return out

    def read_block(self, start: int, stop: int) -> np.ndarray:
        values = self.ref.read_span(start, stop)
        out = np.asarray(values.reshape(-1, self.num_features), dtype=np.float32)
        step = max(1, READ_BYTES // max(1, self.num_features * 4))
        for first in range(0, len(out), step):
            rows = range(start + first, min(start + first + step, stop))
            refuse_non_finite(out[first : first + step], self.ref.file, functools.partial(self.locate, rows))
        return out

    def locate(self, rows: Sequence[int] | np.ndarray, at: tuple[int, ...]) -> tuple[int | None, str | None]:
        """The array index of entry `at` of the block of `rows`."""
        return None, f"{self.ref.name}[{rows[at[0]]}, {at[1] if len(at) > 1 else 0}]"


def load_features(path: str) -> FeatureSource:
    """Node features of a .npy (memory-mapped), an .npz (the only array, or 'node_feat'/'features'/'x'),
    or a scipy.sparse CSR matrix saved by save_npz (densified by row blocks).

    Any numeric dtype is returned as float32. A compressed .npz member needs `prepare(workdir)` before
    `read_rows`, which extracts it once.
    """
    check_readable(path)
    lower = path.lower()
    if lower.endswith(".npy"):
        return FeatureArray(ArrayRef(path))
    if lower.endswith(".npz") and set(npz_keys(path)) >= SCIPY_KEYS:
        fmt = read_format(path)
        if fmt != "csr":
            raise InputError(f"{path}[format]", f"sparse features must be 'csr' (use .tocsr()), got '{fmt}'")
        return CsrFeatures(path, "")
    if lower.endswith(".npz"):
        return FeatureArray(ArrayRef(path, pick_key(path, FEATURE_KEYS)))
    raise InputError(path, "expected node features as a .npy or .npz array file")


def whole_numbers(node_values: NodeValues, what: str) -> np.ndarray:
    """Integer-valued entries as int64: float NaN becomes -1; other non-whole floats, and values int64
    cannot hold (uint64 or float ones from 2^63), fail."""
    values = node_values.values
    check_kind(values.dtype, node_values.file, f"{what} as numbers", "biuf")
    if values.dtype.kind == "u" and values.dtype.itemsize == 8:
        node_values.fail_first(
            values > np.iinfo(np.int64).max, lambda v: f"expected an integer {what} below 2^63, got {v}"
        )
    if values.dtype.kind != "f":
        return values.astype(np.int64)
    known = ~np.isnan(values)
    node_values.fail_first(
        known & ~(np.isfinite(values) & (np.floor(values) == values) & (np.abs(values) < 2.0**63)),
        lambda v: f"expected an integer {what} below 2^63 (or NaN for none), got {v}",
    )
    return np.where(known, values, -1).astype(np.int64)


def load_labels(path: str, num_nodes: int) -> tuple[np.ndarray, int | None]:
    """Labels (int64; -1 = unlabelled) and the class count if they declare one, from .npy/.npz/text.

    One label per node (float NaN = unlabelled, as OGB stores them; no class count: the pipeline infers
    it), or an int (N, K) 0/1 multi-label matrix (-1 = unknown) whose class count is K.
    """
    node_values = read_node_values(path, LABEL_KEYS).squeezed()
    if node_values.values.ndim not in (1, 2):
        raise InputError(
            path,
            f"expected one label per node or a (nodes x classes) matrix, got shape "
            f"{node_values.values.shape}",
        )
    node_values.check_rows(num_nodes)
    labels = whole_numbers(node_values, "label")
    if labels.ndim == 2:
        node_values.fail_first(
            (labels < -1) | (labels > 1), lambda v: f"expected a 0/1 (or -1) multi-label, got {v}"
        )
        return labels, labels.shape[1]
    node_values.fail_first(labels < -1, lambda v: f"expected a class id >= 0 (or -1 for none), got {v}")
    return labels, None


def word_text(word: object) -> str:
    """A split word as normalized text."""
    text = word.decode("latin-1") if isinstance(word, bytes) else str(word)
    return text.strip().lower()


def split_from_words(node_values: NodeValues) -> np.ndarray:
    """Codes of a string split array ('train', 'valid'/'val', 'test', 'none'/'' and the code digits; a text
    file skips blank lines, so it writes 'none')."""
    words, inverse = np.unique(node_values.values, return_inverse=True)
    codes = np.array([SPLIT_WORDS.get(word_text(word), UNKNOWN) for word in words], dtype=np.int8)
    node_values.fail_first(codes[inverse].reshape(node_values.values.shape) == UNKNOWN, unknown_split_word)
    return codes[inverse].reshape(node_values.values.shape)


def unknown_split_word(word: object) -> str:
    """Why a word is not a split entry; True/False are a node mask's, whose form is said."""
    text = word_text(word)
    if text in ("true", "false"):
        return (
            f"'{text}' is a node mask's entry, not a split: expected one split per node (0 or 'train', 1 or "
            f"'valid', 2 or 'test', -1 or 'none'); give masks as {MASK_FORM}"
        )
    return f"expected 'train', 'valid' (or 'val'), 'test', or 'none' (or '') for none, got '{text}'"


def split_from_codes(node_values: NodeValues) -> np.ndarray:
    """A numeric split array (0 train, 1 valid, 2 test, -1 none), checked, as int8. A boolean array is a
    node mask, not codes (its nodes would be valid, all others train): refused, saying how to give masks."""
    if node_values.values.dtype.kind == "b":
        raise InputError(
            node_values.file,
            f"a boolean array (a node mask?), expected split codes (0 train, 1 valid, 2 test, -1 none) or "
            f"words; give masks as {MASK_FORM}",
        )
    codes = whole_numbers(node_values, "split code")
    node_values.fail_first(
        (codes < -1) | (codes > 2),
        lambda v: f"expected a split code 0 (train), 1 (valid), 2 (test) or -1, got {v}",
    )
    if codes.size and np.isin(codes, (0, 1)).all():
        logging.getLogger("gtool").warning(
            "notice: %s holds split codes 0 (train) and 1 (valid) only, so no node is a test node; if it "
            "is a 0/1 node mask, give masks as %s",
            node_values.file,
            MASK_FORM,
        )
    return codes.astype(np.int8)


def node_set(path: str, key: str, num_nodes: int) -> tuple[np.ndarray, bool]:
    """The nodes of member `key` of an .npz: a mask when its name says so (train_mask, ...) or its dtype is
    bool (one entry per node), else an index array of node ids, each in 0..num_nodes-1; an integer 0/1
    array of one entry per node is refused (a mask read as ids would be nodes 0 and 1)."""
    values = load_array(ArrayRef(path, key))
    if key.endswith("_mask") or values.dtype.kind == "b":
        return mask_nodes(NodeValues(values, path, key).squeezed(), num_nodes), True
    ids = as_node_ids(np.ravel(values), path, lambda k: f"{key}[{k}]")
    bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
    if bad.size:
        k = int(bad[0])
        raise InputError(path, f"node {ids[k]} is outside 0..{num_nodes - 1}", index=f"{key}[{k}]")
    if ids.size == num_nodes > 2 and np.isin(ids, (0, 1)).all():
        raise InputError(
            path,
            f"{key} holds {num_nodes} entries of 0 and 1, one per node: a 0/1 node mask, not node ids? store "
            f"masks as bool, or name them {', '.join(MASK_KEYS)}",
        )
    return ids, False


def mask_nodes(mask: NodeValues, num_nodes: int) -> np.ndarray:
    """The nodes of a node mask: one bool, or 0/1 integer, entry per node."""
    if mask.values.ndim != 1:
        raise InputError(mask.file, f"a node mask of shape {mask.values.shape}, expected ({num_nodes},)")
    mask.check_rows(num_nodes)
    if mask.values.dtype.kind != "b":
        values = whole_numbers(mask, "mask entry")
        mask.fail_first((values < 0) | (values > 1), lambda v: f"expected a 0/1 (or bool) node mask, got {v}")
    return np.flatnonzero(mask.values)


def split_from_node_sets(path: str, keys: list[str], num_nodes: int) -> np.ndarray:
    """Codes from the members of an .npz that name the nodes of each split: node index arrays or masks
    'train', 'valid' (or 'val'), 'test', or masks 'train_mask', 'val_mask' (or 'valid_mask'), 'test_mask'."""
    split = np.full(num_nodes, -1, dtype=np.int8)
    for key, code in SPLIT_SETS:
        if key not in keys:
            continue
        ids, mask = node_set(path, key, num_nodes)
        taken = np.flatnonzero((split[ids] != -1) & (split[ids] != code))
        if taken.size:
            k = int(taken[0])
            raise InputError(path, f"node {ids[k]} is in two splits", index=f"{key}[{ids[k] if mask else k}]")
        split[ids] = code
    return split


def load_split(path: str, num_nodes: int) -> np.ndarray:
    """The split as int8 codes (0 train, 1 valid, 2 test, -1 none).

    From a per-node array (.npy/.npz/text) of codes or of the words 'train'/'valid'/'test'/'', or from
    an .npz of node index arrays or masks per split (split_from_node_sets).
    """
    check_readable(path)
    if path.lower().endswith(".npz"):
        keys = npz_keys(path)
        if any(key in keys for key, _ in SPLIT_SETS):
            return split_from_node_sets(path, keys, num_nodes)
    node_values = read_node_values(path, SPLIT_KEYS, words=True).squeezed()
    if node_values.values.ndim != 1:
        raise InputError(path, f"expected one split entry per node, got shape {node_values.values.shape}")
    node_values.check_rows(num_nodes)
    if node_values.values.dtype.kind in "US":
        return split_from_words(node_values)
    return split_from_codes(node_values)
