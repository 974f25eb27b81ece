"""What the workers of an external cluster must see, and the one line that refuses a run when some do not:
the check's logic with a stand-in for the cluster (tests/preprocess/test_external_cluster.py runs it
against real workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from gtool.errors import GtoolError
from gtool.preprocess import pipeline
from gtool.preprocess.engine.shared import Place, check_shared, input_files, seen
from gtool.preprocess.options import ShardOptions


class NoCredentialsError(Exception):
    """Named as botocore's."""


class LockedFileSystem(MemoryFileSystem):
    """A URL this process may write and the workers cannot reach (their credentials are missing)."""

    protocol = "locked"
    on_worker = False

    def cat_file(self, path: str, *args: Any, **kwargs: Any) -> bytes:
        if LockedFileSystem.on_worker:
            raise NoCredentialsError("Unable to locate credentials")
        return super().cat_file(path, *args, **kwargs)


class Cluster:
    """Two workers: `tcp://a` sees what this process sees; `tcp://b` runs in another folder tree
    (`elsewhere`: paths under it are not there for it) and has no credentials."""

    def __init__(self, elsewhere: Path):
        self.elsewhere = str(elsewhere)

    def run(self, fn: Any, checks: list, on_error: str) -> dict[str, Any]:
        answers = {"tcp://a": fn(checks)}
        LockedFileSystem.on_worker = True
        try:
            hidden = [(p.replace(self.elsewhere, self.elsewhere + "-not-here"), s, r) for p, s, r in checks]
            answers["tcp://b"] = fn(hidden)
        finally:
            LockedFileSystem.on_worker = False
        return answers

    def scheduler_info(self, n_workers: int) -> dict:
        return {"workers": {"tcp://a": {"last_seen": 1.0}, "tcp://b": {"last_seen": 1.0}}}


@pytest.fixture(autouse=True)
def locked_protocol():
    fsspec.register_implementation("locked", LockedFileSystem, clobber=True)


def test_every_place_seen_by_every_worker_passes_and_leaves_no_token(tmp_path: Path) -> None:
    edges = tmp_path / "edges.npy"
    np.save(edges, np.zeros((2, 3), dtype=np.int64))
    places = [Place("the spill folder", str(tmp_path)), Place("SOURCE", str(edges), edges.stat().st_size)]
    check_shared(Cluster(tmp_path / "nowhere"), places, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edges.npy"]


def test_a_folder_one_worker_does_not_see_is_one_line_naming_it(tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    places = [Place("the spill folder", str(tmp_path / "shared")), Place("-o's folder", str(local))]
    (tmp_path / "shared").mkdir()
    with pytest.raises(GtoolError) as raised:
        check_shared(Cluster(local), places, 10)
    line = str(raised.value)
    assert "\n" not in line and line.endswith("nothing was done")
    assert line.startswith(f"{local} (-o's folder): Dask worker tcp://b does not see this folder (not there)")
    assert "tcp://a" not in line and "or give -o an fsspec URL" in line
    assert list(local.iterdir()) == []


def test_an_input_file_one_worker_cannot_read_is_named(tmp_path: Path) -> None:
    edges = tmp_path / "edges.npy"
    edges.write_bytes(b"12345")
    with pytest.raises(
        GtoolError, match=r"edges\.npy \(SOURCE\): Dask worker tcp://b cannot read it \(no such"
    ):
        check_shared(Cluster(tmp_path), [Place("SOURCE", str(edges), 5)], 10)


def test_a_url_a_worker_has_no_credentials_for_is_named_with_its_error() -> None:
    with pytest.raises(GtoolError) as raised:
        check_shared(Cluster(Path("/nowhere")), [Place("-o", "locked://bucket/g.zarr")], 10)
    line = str(raised.value)
    assert line.startswith("locked://bucket/g.zarr (-o): Dask worker tcp://b cannot reach it")
    assert "NoCredentialsError: Unable to locate credentials" in line and "AWS_ACCESS_KEY_ID" in line


def test_a_worker_that_finds_a_file_of_another_size_says_so(tmp_path: Path) -> None:
    edges = tmp_path / "edges.npy"
    edges.write_bytes(b"123")
    assert seen([(str(edges), 5, "run")]) == ["3 bytes, not 5"]


def test_the_files_a_source_hands_to_workers_are_found_in_its_attributes(tmp_path: Path) -> None:
    from gtool.preprocess.resolve import resolve_source

    edges = tmp_path / "edges.npy"
    np.save(edges, np.array([[0, 1], [1, 2]]))
    assert input_files(resolve_source(str(edges), ShardOptions()), None) == [str(edges)]
    assert input_files(resolve_source("rmat:5:2", ShardOptions())) == []


def test_missing_credentials_of_this_process_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise NoCredentialsError("Unable to locate credentials")

    monkeypatch.setattr(pipeline, "StagedOutput", refuse)
    with pytest.raises(GtoolError, match=r"^-o s3://bucket/g\.zarr: cannot reach it \(NoCredentialsError: "):
        pipeline.shard("rmat:5:2", "s3://bucket/g.zarr", ShardOptions())
