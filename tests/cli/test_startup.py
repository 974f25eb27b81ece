"""The `gtool` command starts light: torch loads only for the commands that train, numpy and zarr only for
the commands that read or write data (`gtool --help` takes well under a second)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # a fresh interpreter


def test_the_command_line_loads_no_torch() -> None:
    probe = (
        "import sys, gtool.cli.main; print(sorted(m for m in ('torch', 'distributed') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_command_line_loads_no_data_library_before_a_command_runs() -> None:
    libraries = ("numpy", "zarr", "psutil", "pandas", "dask", "scipy")
    probe = f"import sys, gtool.cli.main; print(sorted(m for m in {libraries!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
