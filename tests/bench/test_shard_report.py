"""bench.shard_report: `gtool shard` as a user runs it, with its summary's figures saved as JSON too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import shard_report


@pytest.mark.integration
def test_the_summary_is_shown_and_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    report = tmp_path / "report.json"
    args = ["rmat:10:4", "--tiles", "2x2", "-o", str(tmp_path / "s.zarr"), "--workers", "1", "--quiet"]
    monkeypatch.setattr(sys, "argv", ["shard_report", str(report), *args])
    with pytest.raises(SystemExit) as ended:
        shard_report.main()
    assert ended.value.code in (0, None)
    figures = json.loads(report.read_text())
    assert figures["seconds"] > 0 and "map" in figures["stage_seconds"] and figures["bytes_written"] > 0
    assert "peak memory" in capsys.readouterr().out  # the summary is the result: stdout
