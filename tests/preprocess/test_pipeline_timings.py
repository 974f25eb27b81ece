"""The summary's time line: every timed step of a run, their sum within the run's seconds."""

from __future__ import annotations

import pytest

from gtool.preprocess.options import ShardOptions
from gtool.preprocess.pipeline import shard

pytestmark = pytest.mark.integration  # runs the pipeline


def test_the_summary_times_the_cluster_the_permutations_and_every_stage(tmp_path):
    summary = shard("grid:5x6", str(tmp_path / "s.zarr"), ShardOptions(tiles=2, workers=1))
    steps = summary.stage_seconds
    assert {"prepare", "cluster", "permutations", "map", "dedupe", "write", "nodes", "features"} <= set(steps)
    assert all(seconds >= 0 for seconds in steps.values())
    assert sum(steps.values()) <= summary.seconds
