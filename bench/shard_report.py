"""`gtool shard ARGS`, run as the `gtool` program runs it, and the figures of its summary written as JSON
too (for the benchmarks).

python -m bench.shard_report REPORT.json SOURCE [gtool shard options]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from gtool.cli import shard as shard_command
from gtool.preprocess.summary import ShardSummary


def figures(summary: ShardSummary) -> dict:
    """Wall time, stage times, per-stage disk I/O with busy seconds, peaks and bytes written."""
    return {
        "seconds": summary.seconds,
        "stage_seconds": summary.stage_seconds,
        "stage_io": {
            stage: {**dataclasses.asdict(io), "busy_s": summary.busy_seconds(stage)}
            for stage, io in summary.stage_io.items()
        },
        "peak_rss_mb": summary.peak_rss_mb,
        "spill_peak_bytes": summary.spill_peak_bytes,
        "bytes_written": summary.bytes_written,
    }


def main() -> None:
    report = Path(sys.argv.pop(1))
    shown = shard_command.print_summary

    def show_and_save(summary: ShardSummary, external_cluster: bool = False) -> None:
        shown(summary, external_cluster)
        report.write_text(json.dumps(figures(summary), indent=2))

    shard_command.print_summary = show_and_save
    from gtool.cli.main import program

    sys.argv = ["gtool", "shard", *sys.argv[1:]]
    program()  # as the `gtool` command runs it: its start-up and its prompt exit included


if __name__ == "__main__":
    main()
