"""bench.common.measured without ../shared/tools/peakmem (a user's clone): the peak of the whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import common

pytestmark = pytest.mark.integration  # starts processes

HOLD = "import numpy as np, time; a = np.ones({n}); time.sleep(0.6)"
"""A process that holds n float64 (touched) for a while."""


@pytest.fixture
def no_peakmem(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(common, "PEAKMEM", tmp_path / "absent")


def test_the_peak_sums_a_process_and_its_descendants(no_peakmem) -> None:
    hold = HOLD.format(n=100 * (1 << 20) // 8)
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {hold!r}])"
    parent = f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {child!r}]); "
    figures, stdout = common.measured([sys.executable, "-c", f"{parent}{hold}; p.wait(); print('done')"])
    assert stdout == "done\n"
    assert figures["peak_rss_mb"] >= 200  # the two 100 MB arrays (parent, grandchild) held at once
    assert figures["wall_s"] >= 0.6


def test_a_failed_command_raises(no_peakmem) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        common.measured([sys.executable, "-c", "import sys; sys.exit(3)"])
