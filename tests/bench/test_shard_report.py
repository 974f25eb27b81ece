"""bench.shard_report: `gtool shard` as a user runs it, with its summary's figures saved as JSON too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import REPO


@pytest.mark.integration
def test_the_summary_is_shown_and_saved(tmp_path: Path) -> None:
    """Run as the benchmarks run it: a process of its own, which ends as the `gtool` program does."""
    report = tmp_path / "report.json"
    args = ["rmat:10:4", "--tiles", "2x2", "-o", str(tmp_path / "s.zarr"), "--workers", "1", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.shard_report", str(report), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(report.read_text())
    assert figures["seconds"] > 0 and "map" in figures["stage_seconds"] and figures["bytes_written"] > 0
    assert "peak memory" in done.stdout  # the summary is the result: stdout
