"""The summary `gtool shard` prints at the end of a run."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gtool.cli import shard as shard_cli
from gtool.preprocess.summary import ShardSummary

UNCOUNTED = "(an external cluster's workers not counted)"


def printed(monkeypatch: pytest.MonkeyPatch, external_cluster: bool) -> str:
    out = io.StringIO()
    monkeypatch.setattr(shard_cli, "out", Console(file=out, width=300))
    summary = ShardSummary("s.zarr", "grid:3x3", 9, 12, {}, 2, {}, 1.0, 1000, 512.0)
    shard_cli.print_summary(summary, external_cluster=external_cluster)
    return out.getvalue()


def test_peak_memory_of_a_local_run_counts_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    text = printed(monkeypatch, external_cluster=False)
    assert "512 MB RSS of the process tree" in text and UNCOUNTED not in text


def test_peak_memory_on_an_external_cluster_says_its_workers_are_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert f"512 MB RSS of the process tree {UNCOUNTED}" in printed(monkeypatch, external_cluster=True)
