"""Node files: features read by rows out of core, labels and splits validated against the node count."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gtool
from gtool.cli.main import app
from gtool.errors import InputError
from gtool.preprocess.sources.nodes.files import load_features, load_labels, load_split

FEATURES = np.arange(40 * 6, dtype=np.float64).reshape(40, 6) / 7


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_npy_features_any_dtype_as_float32(tmp_path: Path, dtype) -> None:
    np.save(tmp_path / "x.npy", FEATURES.astype(dtype))
    features = load_features(str(tmp_path / "x.npy"))
    assert (features.num_rows, features.num_features) == (40, 6)
    rows = np.array([0, 3, 17, 39])
    got = pickle.loads(pickle.dumps(features)).read_rows(rows)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, FEATURES.astype(dtype)[rows].astype(np.float32))


@pytest.mark.parametrize(("save", "key"), [(np.savez, "node_feat"), (np.savez_compressed, "x")])
def test_npz_features(tmp_path: Path, save, key: str) -> None:
    save(tmp_path / "f.npz", **{key: FEATURES, "other": np.zeros(3)})
    features = load_features(str(tmp_path / "f.npz"))
    features.prepare(str(tmp_path / "work"))
    np.testing.assert_allclose(features.read_rows(np.arange(40)), FEATURES.astype(np.float32))
    assert features.where == f"{tmp_path / 'f.npz'}[{key}]"


def test_non_finite_feature_names_row_and_column(tmp_path: Path) -> None:
    bad = FEATURES.copy()
    bad[5, 2] = np.nan
    np.save(tmp_path / "x.npy", bad)
    with pytest.raises(InputError, match="not a finite") as info:
        load_features(str(tmp_path / "x.npy")).read_rows(np.arange(10))
    assert info.value.index == "array[5, 2]"


def test_npz_features_need_a_known_key(tmp_path: Path) -> None:
    np.savez(tmp_path / "f.npz", a=FEATURES, b=FEATURES)
    with pytest.raises(InputError, match="'node_feat' or 'features' or 'x'"):
        load_features(str(tmp_path / "f.npz"))


def test_labels_int_float_nan_and_multilabel(tmp_path: Path) -> None:
    np.save(tmp_path / "l.npy", np.array([0, 2, -1, 1]))
    labels, classes = load_labels(str(tmp_path / "l.npy"), 4)
    assert labels.tolist() == [0, 2, -1, 1] and classes is None and labels.dtype == np.int64
    np.savez_compressed(tmp_path / "l.npz", node_label=np.array([[1.0], [np.nan], [4.0]]))
    labels, classes = load_labels(str(tmp_path / "l.npz"), 3)
    assert labels.tolist() == [1, -1, 4] and classes is None
    np.save(tmp_path / "m.npy", np.array([[0, 1, 1], [1, 0, 0]], dtype=np.int64))
    labels, classes = load_labels(str(tmp_path / "m.npy"), 2)
    assert labels.shape == (2, 3) and classes == 3


def test_text_labels(tmp_path: Path) -> None:
    (tmp_path / "l.txt").write_text("# labels\n3\nnan\n0\n")
    labels, classes = load_labels(str(tmp_path / "l.txt"), 3)
    assert labels.tolist() == [3, -1, 0] and classes is None
    (tmp_path / "bad.txt").write_text("# labels\n3\n\n-4\n0\n")
    with pytest.raises(InputError, match="got -4") as info:
        load_labels(str(tmp_path / "bad.txt"), 3)
    assert info.value.line == 4
    (tmp_path / "word.txt").write_text("1\ncat\n")
    with pytest.raises(InputError, match="got 'cat'") as info:
        load_labels(str(tmp_path / "word.txt"), 2)
    assert info.value.line == 2
    (tmp_path / "wide.txt").write_text("1\n\uff12\n", encoding="utf-8")  # a full-width 2: shown as such
    with pytest.raises(InputError, match="got '\uff12'"):
        load_labels(str(tmp_path / "wide.txt"), 3)


@pytest.mark.parametrize(
    ("values", "message", "index"),
    [
        (np.array([0, -2, 1]), "got -2", "array[1]"),
        (np.array([0.0, 1.5, 1.0]), "got 1.5", "array[1]"),
        (np.array([[0, 2], [1, 0], [0, 0]]), "multi-label, got 2", "array[0, 1]"),
    ],
)
def test_labels_out_of_range(tmp_path: Path, values: np.ndarray, message: str, index: str) -> None:
    np.save(tmp_path / "l.npy", values)
    with pytest.raises(InputError, match=message) as info:
        load_labels(str(tmp_path / "l.npy"), 3)
    assert info.value.index == index and info.value.where == str(tmp_path / "l.npy")


def test_wrong_length_labels(tmp_path: Path) -> None:
    np.save(tmp_path / "l.npy", np.zeros(3, np.int64))
    with pytest.raises(InputError, match="3 rows, expected 5 nodes"):
        load_labels(str(tmp_path / "l.npy"), 5)


def test_split_codes_words_and_index_sets(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", np.array([0, 1, 2, -1], dtype=np.int8))
    assert load_split(str(tmp_path / "s.npy"), 4).tolist() == [0, 1, 2, -1]
    np.save(tmp_path / "w.npy", np.array(["train", "valid", "", "test"]))
    split = load_split(str(tmp_path / "w.npy"), 4)
    assert split.tolist() == [0, 1, -1, 2] and split.dtype == np.int8
    np.savez(tmp_path / "i.npz", train=np.array([3, 0]), valid=np.array([1]), test=np.array([4]))
    assert load_split(str(tmp_path / "i.npz"), 5).tolist() == [0, 1, -1, 0, 2]
    (tmp_path / "s.txt").write_text("train\ntest\nvalid\n")
    assert load_split(str(tmp_path / "s.txt"), 3).tolist() == [0, 2, 1]
    (tmp_path / "n.txt").write_text("train\nnone\nval\n")
    assert load_split(str(tmp_path / "n.txt"), 3).tolist() == [0, -1, 1]


@pytest.mark.parametrize(
    ("values", "message", "index"),
    [
        (np.array([0, 3, 1]), "split code 0 .* got 3", "array[1]"),
        (np.array(["train", "dev", "test"]), "got 'dev'", "array[1]"),
    ],
)
def test_split_code_out_of_range(tmp_path: Path, values: np.ndarray, message: str, index: str) -> None:
    np.save(tmp_path / "s.npy", values)
    with pytest.raises(InputError, match=message) as info:
        load_split(str(tmp_path / "s.npy"), 3)
    assert info.value.index == index


def test_split_index_sets_errors(tmp_path: Path) -> None:
    np.savez(tmp_path / "r.npz", train=np.array([0, 7]), test=np.array([1]))
    with pytest.raises(InputError, match="node 7 is outside 0..4") as info:
        load_split(str(tmp_path / "r.npz"), 5)
    assert info.value.index == "train[1]"
    np.savez(tmp_path / "o.npz", train=np.array([0, 1]), test=np.array([1]))
    with pytest.raises(InputError, match="two splits") as info:
        load_split(str(tmp_path / "o.npz"), 5)
    assert info.value.index == "test[0]"


def test_masks_are_read_as_masks_where_the_form_says_so_and_refused_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A bool train mask given as codes stored its nodes as valid and every other node as train; an int 0/1
    mask under 'train' of an .npz was read as the node ids {0, 1}."""
    train, valid = np.arange(6) < 3, np.arange(6) == 4
    np.savez(tmp_path / "m.npz", train=train, valid=valid, test=np.array([5]))
    assert load_split(str(tmp_path / "m.npz"), 6).tolist() == [0, 0, 0, -1, 1, 2]
    np.savez(tmp_path / "p.npz", train_mask=train.astype(int), val_mask=valid, test_mask=np.arange(6) == 5)
    assert load_split(str(tmp_path / "p.npz"), 6).tolist() == [0, 0, 0, -1, 1, 2]
    refusals = {
        "b.npy": (
            train,
            r"b.npy: a boolean array \(a node mask\?\), expected split codes .* give masks as bool",
        ),
        "i.npz": (
            {"train": train.astype(int)},
            r"i.npz: train holds 6 entries of 0 and 1, one per node: a 0/1",
        ),
        "s.npz": (
            {"train_mask": train, "test": np.array([2])},
            r"s.npz, train_mask\[2\]: node 2 is in two splits",
        ),
        "o.npz": (
            {"train": [0], "val_mask": np.arange(6) < 2},
            r"o.npz, val_mask\[0\]: node 0 is in two spl",
        ),
        "l.npz": ({"test_mask": train[:5]}, r"l.npz: 5 rows, expected 6 nodes"),
        "v.npz": ({"train_mask": np.arange(6)}, r"v.npz, train_mask\[2\]: expected a 0/1 \(or bool\) node m"),
    }
    for name, (content, message) in refusals.items():
        if name.endswith(".npy"):
            np.save(tmp_path / name, content)
        else:
            np.savez(tmp_path / name, **content)
        with pytest.raises(InputError, match=message):
            load_split(str(tmp_path / name), 6)
    np.save(tmp_path / "c.npy", train.astype(np.int8))
    with caplog.at_level("WARNING", logger="gtool"):
        assert load_split(str(tmp_path / "c.npy"), 6).tolist() == [1, 1, 1, 0, 0, 0]
    assert "c.npy holds split codes 0 (train) and 1 (valid) only, so no node is a test node" in caplog.text


def test_wrong_length_split(tmp_path: Path) -> None:
    np.save(tmp_path / "s.npy", np.zeros(4, np.int8))
    with pytest.raises(InputError, match="4 rows, expected 3 nodes"):
        load_split(str(tmp_path / "s.npy"), 3)


@pytest.mark.integration
def test_gtool_shard_stores_masks_by_their_nodes_and_refuses_a_mask_given_as_codes(tmp_path: Path) -> None:
    n = 20
    train, valid, test = np.arange(n) < 12, (np.arange(n) >= 12) & (np.arange(n) < 16), np.arange(n) >= 16
    np.save(tmp_path / "train_mask.npy", train)
    np.savez(tmp_path / "masks.npz", train=train, valid=valid, test=test)
    shard = ["shard", "grid:4x5", "--tiles", "2x2", "-q", "-w", "1", "--split"]
    refused = CliRunner().invoke(
        app,
        [*shard, str(tmp_path / "train_mask.npy"), "-o", str(tmp_path / "a.zarr")],
        env={"COLUMNS": "300"},
    )
    assert refused.exit_code == 2 and refused.output.startswith(
        f"error: {tmp_path / 'train_mask.npy'}: a boolean array (a node mask?), expected split codes"
    ), refused.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["masks.npz", "train_mask.npy"]
    stored = CliRunner().invoke(app, [*shard, str(tmp_path / "masks.npz"), "-o", str(tmp_path / "b.zarr")])
    assert stored.exit_code == 0, stored.output
    np.testing.assert_array_equal(gtool.split(str(tmp_path / "b.zarr")), train * 0 + valid * 1 + test * 2)


@pytest.mark.integration
@pytest.mark.parametrize("words", [("True", "False"), ("true", "false"), ("TRUE", "FALSE")])
def test_a_text_split_of_true_and_false_is_refused_naming_the_line(
    tmp_path: Path, words: tuple[str, str]
) -> None:
    """A text file of True/False words, a node mask, used to be read as split codes 1 and 0 (pandas turns a
    column of them into numbers): its nodes valid, all others train."""
    (tmp_path / "mask.txt").write_text("# train mask\n" + "\n".join(words[k % 2] for k in range(20)) + "\n")
    refused = CliRunner().invoke(
        app,
        ["shard", "grid:4x5", "--tiles", "2x2", "-q", "-w", "1", "--split", str(tmp_path / "mask.txt")]
        + ["-o", str(tmp_path / "a.zarr")],
        env={"COLUMNS": "300"},
    )
    assert refused.exit_code == 2, refused.output
    assert refused.output.splitlines() == [
        f"error: {tmp_path / 'mask.txt'}, line 2: 'true' is a node mask's entry, not a split: expected one "
        "split per node (0 or 'train', 1 or 'valid', 2 or 'test', -1 or 'none'); give masks as bool arrays "
        "train, valid, test (or train_mask, val_mask, test_mask) of an .npz"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mask.txt"]


def test_text_labels_of_true_and_false_are_refused_naming_the_line(tmp_path: Path) -> None:
    """Labels are numbers: a column of True/False words used to be read as classes 1 and 0."""
    (tmp_path / "y.txt").write_text("nan\nTrue\nFalse\n")
    with pytest.raises(InputError) as info:
        load_labels(str(tmp_path / "y.txt"), 3)
    assert str(info.value) == f"{tmp_path / 'y.txt'}, line 2: expected a number, got 'True'"
