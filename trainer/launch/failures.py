"""A failed rank of a run, as the launcher reports it; a local launch's supervisor hands it over in a file."""

from __future__ import annotations

import json
import traceback
from pathlib import Path

from gtool.errors import GtoolError

FAILURE = "failure.json"
"""The file in which a local launch's supervisor leaves the failure of the rank that failed first."""


class RankFailed(GtoolError):
    """A rank of a run failed (its `error`), the rank to blame; the others were stopped. A `headline` says
    it in other words (ranks lost with their node)."""

    def __init__(self, rank: int, error: str, details: str = "", headline: str | None = None):
        self.rank = rank
        self.error = error
        self.details = details
        super().__init__(headline or f"rank {rank} failed: {error}")


def rank_failure(rank: int, error: BaseException) -> RankFailed:
    """`error`, raised in rank `rank`, as a RankFailed (with its traceback unless it is a user error)."""
    details = "" if isinstance(error, GtoolError) else traceback.format_exc()
    return RankFailed(rank, f"{type(error).__name__}: {error}", details)


def write_failure(run_dir: str | Path, failure: RankFailed, name: str = FAILURE) -> None:
    """Leave `failure` in run_dir (as `name`) for the process that reads it back (`read_failure`)."""
    report = {"rank": failure.rank, "error": failure.error, "details": failure.details}
    (Path(run_dir) / name).write_text(json.dumps(report))


def read_failure(path: Path) -> RankFailed:
    """The failure that `write_failure` left in `path`."""
    report = json.loads(path.read_text())
    return RankFailed(report["rank"], report["error"], report["details"])


def ranks_text(ranks: list[int], hosts: list[str]) -> str:
    """'ranks 2, 3 (on host h)' of the ranks that failed a check, with their hosts."""
    shown = ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    where = ", ".join(sorted({hosts[r] for r in ranks}))
    return f"rank{'s' if len(ranks) > 1 else ''} {shown} (on host {where})"
