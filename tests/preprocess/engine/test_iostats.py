"""Per-stage disk bytes: counted per thread, added up per (run, stage), taken once."""

from __future__ import annotations

import os
from pathlib import Path

from gtool.cli.shard import stage_io_text
from gtool.preprocess.engine.iostats import Measured, StageIO, take_totals, thread_io
from gtool.preprocess.summary import ShardSummary


def write_file(path: Path, size: int) -> int:
    with open(path, "wb") as file:
        file.write(os.urandom(size))
    return size


def test_a_stage_adds_up_its_tasks_disk_writes_and_seconds(tmp_path):
    before = thread_io()
    measured = Measured(write_file, "run-a", "write files")
    assert measured(tmp_path / "a", 1 << 20) == 1 << 20
    measured(tmp_path / "b", 1 << 20)
    Measured(write_file, "run-b", "write files")(tmp_path / "c", 1 << 20)
    totals = take_totals("run-a")
    assert set(totals) == {"write files"}
    io = totals["write files"]
    if thread_io() != (0, 0) or before != (0, 0):  # the kernel counts (Linux with task I/O accounting)
        assert io.written >= 2 << 20
    assert io.task_seconds > 0
    assert take_totals("run-a") == {}
    assert set(take_totals("run-b")) == {"write files"}


def test_the_summary_shows_bytes_busy_seconds_and_rate_per_stage():
    io = {"route features": StageIO(read=3 << 30, written=1 << 30, task_seconds=8.0)}
    summary = ShardSummary("s.zarr", "src", 10, 10, {}, 1, {}, 1.0, 0, 0.0, stage_io=io, concurrency=2)
    assert stage_io_text(summary) == "route features: 3.0 GiB in, 1.0 GiB out, 4.0 s, 1.0 GiB/s"
