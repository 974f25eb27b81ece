"""MapOutputs: a dedupe task finds its partitions' entries in the thread files the map tasks appended to."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from gtool.preprocess import spill
from gtool.preprocess.edges import mapper
from gtool.preprocess.edges.mapper import MapOutputs, MapResult, thread_file


def appended(root: str, chunks: list[np.ndarray], counts: list[list[int]], writers: list[int]) -> list:
    """Map results of `chunks` (entries sorted by partition, with their partition counts), chunk k appended
    to the file of writer writers[k]."""
    results = []
    for k, (keys, count) in enumerate(zip(chunks, counts, strict=True)):
        path = f"{root}/map/m0/w{writers[k]}.bin"
        placed = {0: (path, spill.append_to(keys, path))}
        results.append(MapResult(k, len(keys), {0: np.array(count, dtype=np.int32)}, placed))
    return results


def test_entries_are_each_chunks_range_of_the_partitions(tmp_path):
    chunks = [np.array([10, 11, 20, 21, 22]), np.array([12, 30]), np.array([13, 23, 24, 31])]
    counts = [[2, 3, 0], [1, 0, 1], [1, 2, 1]]  # 3 chunks x 3 partitions
    results = appended(str(tmp_path), chunks, counts, writers=[1, 0, 1])
    outputs, totals = MapOutputs.gathered(results, 0, str(tmp_path))
    np.testing.assert_array_equal(totals, [4, 5, 2])
    assert len(outputs.files) == 2
    np.testing.assert_array_equal(np.sort(outputs.entries(0, 1)), [10, 11, 12, 13])
    np.testing.assert_array_equal(np.sort(outputs.entries(1, 3)), [20, 21, 22, 23, 24, 30, 31])
    assert outputs.entries(2, 2).size == 0


def test_a_cut_map_file_is_named(tmp_path):
    results = appended(str(tmp_path), [np.arange(6), np.arange(4)], [[3, 3], [2, 2]], writers=[0, 0])
    outputs, _ = MapOutputs.gathered(results, 0, str(tmp_path))
    path = outputs.files[0]
    with open(path, "r+b") as file:
        file.truncate(8 * 8)
    with pytest.raises(ValueError, match=f"{path}: truncated"):
        outputs.entries(0, 2)


def test_each_thread_appends_to_a_file_of_its_own(tmp_path):
    paths = []
    worker = threading.Thread(target=lambda: paths.append(thread_file(str(tmp_path), 1)))
    worker.start()
    worker.join()
    assert thread_file(str(tmp_path), 1) != paths[0]
    assert paths[0].startswith(f"{tmp_path}/map/m1/")


def test_processes_with_the_same_host_process_and_thread_ids_append_to_files_of_their_own(tmp_path):
    first = thread_file(str(tmp_path), 0)
    mapper.redraw_process_tag()  # as in a worker of another container with the same host name and ids
    assert thread_file(str(tmp_path), 0) != first


@pytest.mark.integration
def test_a_forked_worker_draws_a_tag_of_its_own():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(mapper.process_tag) != mapper.process_tag()


def test_appends_start_on_a_whole_item_after_a_cut_write(tmp_path):
    path = str(tmp_path / "f.bin")
    assert spill.append_to(np.arange(3, dtype=np.int64), path) == 0
    with open(path, "ab") as file:
        file.write(b"\0\0\0")  # a write cut short
    assert spill.append_to(np.arange(2, dtype=np.int64), path) == 4
    np.testing.assert_array_equal(spill.load_raw(path, np.dtype(np.int64))[4:], [0, 1])
