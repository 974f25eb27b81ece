"""A worker process that dies during a stage (killed, out of memory) costs time, not the store: Dask runs its
tasks again on a fresh worker, the finished ones whose results it held too where they are still wanted, and
the store is byte for byte the one of an undisturbed run; one whose workers keep dying is one error line,
and the run leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from gtool.errors import GtoolError
from gtool.preprocess import pipeline
from gtool.preprocess.edges.mapper import map_chunk
from gtool.preprocess.edges.reducer import tile_row_degrees, write_tiles
from tests.support.stores import all_arrays, make_store

pytestmark = pytest.mark.integration  # runs worker processes

DEATH_MARK: Path | None = None
"""Set by the test before the workers are forked: the first map task of chunk 3 to run creates it and
kills its worker process."""


def map_chunk_once_fatal(item, job):
    if item[0] == 3 and DEATH_MARK is not None and not DEATH_MARK.exists():
        DEATH_MARK.touch()
        os._exit(1)
    return map_chunk(item, job)


def test_a_worker_killed_in_the_map_stage_leaves_the_store_unchanged(tmp_path, monkeypatch):
    edges = tmp_path / "edges.npy"
    np.save(edges, np.random.default_rng(8).integers(0, 2001, size=(2, 40_000)))
    options = {"tiles": 3, "seed": 3, "chunk_edges": 4000, "workers": 2}
    calm = all_arrays(make_store(str(edges), tmp_path / "calm.zarr", **options))
    monkeypatch.setattr(pipeline, "map_chunk", map_chunk_once_fatal)
    monkeypatch.setattr(f"{__name__}.DEATH_MARK", tmp_path / "died")
    disturbed = all_arrays(make_store(str(edges), tmp_path / "disturbed.zarr", **options))
    assert (tmp_path / "died").exists()
    assert calm.keys() == disturbed.keys()
    for name, value in calm.items():
        assert value.tobytes() == disturbed[name].tobytes(), name


CALLS: list[int] = []
"""The calls of a `*_fatal_at_second_call` task in this worker process."""


def die_at_second_call() -> None:
    """The second call in a worker process kills that process, once in the run: the process then holds the
    result of its first task, which Dask computes again if it is still wanted."""
    CALLS.append(1)
    if len(CALLS) == 2 and DEATH_MARK is not None and not DEATH_MARK.exists():
        DEATH_MARK.touch()
        os._exit(1)


def tile_row_degrees_fatal_at_second_call(*args):
    die_at_second_call()
    return tile_row_degrees(*args)


def write_tiles_fatal_at_second_call(*args):
    die_at_second_call()
    return write_tiles(*args)


@pytest.mark.parametrize(
    ("stage", "task"),
    [
        ("tile_row_degrees", tile_row_degrees_fatal_at_second_call),
        ("write_tiles", write_tiles_fatal_at_second_call),
    ],
)
def test_a_worker_killed_after_finishing_a_task_leaves_the_store_unchanged(
    tmp_path, monkeypatch, stage, task
):
    options = {"tiles": 4, "seed": 3, "workers": 2}
    calm = all_arrays(make_store("rmat:16:8", tmp_path / "calm.zarr", **options))
    monkeypatch.setattr(pipeline, stage, task)
    monkeypatch.setattr(f"{__name__}.DEATH_MARK", tmp_path / "died")
    disturbed = all_arrays(make_store("rmat:16:8", tmp_path / "disturbed.zarr", **options))
    assert (tmp_path / "died").exists()
    for name, value in calm.items():
        assert value.tobytes() == disturbed[name].tobytes(), name


def map_chunk_always_fatal(item, job):
    if item[0] == 0:
        os._exit(1)
    return map_chunk(item, job)


def test_a_task_whose_workers_keep_dying_is_one_error_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "map_chunk", map_chunk_always_fatal)
    with pytest.raises(GtoolError, match=r"^a 'map edges' task was started 4 times and each time the worker"):
        make_store("grid:20x17", tmp_path / "s.zarr", tiles=2, workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
