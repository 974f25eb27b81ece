"""Every path `gtool shard` hands to its workers is resolved in the launching process: absolute, `~`
expanded, file:// URLs as paths, other URLs kept; spill and cache folders are never object-store URLs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gtool.errors import GtoolError
from gtool.preprocess.options import ShardOptions
from gtool.preprocess.paths import resolved
from gtool.preprocess.pipeline import check_cluster_spill, spill_root


def test_relative_paths_and_home_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "edges.npy").write_bytes(b"")
    options = ShardOptions(
        spill_dir="scratch",
        cache_dir="~/cache",
        features="x.npy",
        labels="y.npy",
        split="~/s.npy",
        root="data",
    )
    source, output, done = resolved("edges.npy", "out.zarr", options)
    assert (source, output) == (str(tmp_path / "edges.npy"), str(tmp_path / "out.zarr"))
    assert done.spill_dir == str(tmp_path / "scratch") and done.cache_dir == str(tmp_path / "home" / "cache")
    assert (done.features, done.labels, done.split) == (
        str(tmp_path / "x.npy"),
        str(tmp_path / "y.npy"),
        str(tmp_path / "home" / "s.npy"),
    )
    assert done.root == str(tmp_path / "data")


@pytest.mark.parametrize("source", ["rmat:12:8", "cora", "grid:3x4"])
def test_generators_and_dataset_names_stay_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolved(source, "o.zarr", ShardOptions())[0] == source


def test_file_urls_are_paths_and_other_urls_stay(tmp_path: Path) -> None:
    options = ShardOptions(spill_dir=f"file://{tmp_path}/spill")
    _, output, done = resolved("rmat:4", "s3://bucket/g.zarr", options)
    assert output == "s3://bucket/g.zarr" and done.spill_dir == f"{tmp_path}/spill"
    assert resolved("rmat:4", f"file://{tmp_path}/g.zarr", ShardOptions())[1] == f"{tmp_path}/g.zarr"


@pytest.mark.parametrize("flag", ["spill_dir", "cache_dir"])
def test_object_store_folders_are_refused_with_the_reason(flag: str) -> None:
    with pytest.raises(GtoolError, match="must be a folder on a file system, not a URL: the run memory-maps"):
        resolved("rmat:4", "o.zarr", ShardOptions(**{flag: "memory://somewhere"}))


def test_a_url_output_spills_into_the_temporary_folder_not_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    root, where = spill_root("memory://g.zarr", ShardOptions())
    assert root == str(tmp_path / "tmp") and "temporary folder" in where
    assert spill_root(str(tmp_path / "g.zarr"), ShardOptions()) == (None, "the output's folder")
    with pytest.raises(GtoolError, match=r"-o memory://g\.zarr with --scheduler needs --spill-dir"):
        check_cluster_spill("memory://g.zarr", ShardOptions(scheduler="tcp://head:8786"))
