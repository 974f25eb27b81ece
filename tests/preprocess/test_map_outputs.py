"""MapOutputs: a dedupe task finds its partitions' entries in the map files from the spilled offsets."""

from __future__ import annotations

import numpy as np

from gtool.preprocess import spill
from gtool.preprocess.mapper import MapOutputs, map_output


def test_slices_are_the_nonempty_ranges_of_every_chunk(tmp_path):
    counts = np.array([[2, 0, 3], [0, 0, 4], [1, 1, 0]])  # 3 chunks x 3 partitions
    offsets = np.zeros((3, 4), dtype=np.int64)
    np.cumsum(counts, axis=1, out=offsets[:, 1:])
    table = str(tmp_path / "offsets.npy")
    spill.save_to(offsets, table)
    outputs = MapOutputs(str(tmp_path), 1, table)
    assert outputs.slices(1, 2) == [(map_output(str(tmp_path), 1, 2), 1, 2)]
    assert outputs.slices(0, 3) == [
        (map_output(str(tmp_path), 1, 0), 0, 5),
        (map_output(str(tmp_path), 1, 1), 0, 4),
        (map_output(str(tmp_path), 1, 2), 0, 2),
    ]
    assert outputs.slices(1, 1) == []
    assert map_output("/s", 1, 2) == "/s/map/m1/c2.npy"
