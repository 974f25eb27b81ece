"""What a `gtool` command imports, read from Python's import-time report (`-X importtime`) on stderr."""

from __future__ import annotations

import sys

REPORTING_GTOOL = [sys.executable, "-X", "importtime", "-m", "gtool.cli"]
"""`gtool` run so that it reports every module it imports on stderr."""


def imported(stderr: str) -> set[str]:
    """The modules named in an import-time report (other lines of stderr are left out)."""
    return {
        line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")
    }
