"""The run's high-water marks: the spill folder is walked at a bounded share of the time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gtool.preprocess.engine import monitor


def test_a_slow_spill_walk_is_spaced_by_its_own_duration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of many files (T x T tiles' runs) takes long to walk: it is walked again only once
    WALK_SPACING times that long has passed, while the RSS is sampled every time; the peak found stays."""
    walks: list[float] = []
    sizes = iter([5000, 1, 1, 1])

    def slow_walk(folder: Path) -> int:
        walks.append(time.monotonic())
        time.sleep(0.02)
        return next(sizes)

    monkeypatch.setattr(monitor, "folder_bytes", slow_walk)
    high_water = monitor.HighWater(tmp_path)
    for _ in range(10):
        high_water.sample([])
    assert len(walks) == 1 and high_water.peak_spill == 5000
    time.sleep(max(0.0, high_water.walk_due - time.monotonic()))
    high_water.sample([])
    assert len(walks) == 2 and high_water.peak_spill == 5000
    assert walks[1] - walks[0] >= monitor.WALK_SPACING * 0.02
