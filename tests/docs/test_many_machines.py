"""docs/howto/many-machines.md's simulation on one machine runs as written: a `dask scheduler` and two
`dask worker`s started from folders of their own, `gtool shard --scheduler` on them, and `gtool verify`."""

from __future__ import annotations

import re
import shutil

import pytest

from bench.external_cluster import environment
from tests.docs.examples import run_script
from tests.support.paths import REPO

pytestmark = pytest.mark.integration  # runs a scheduler, workers and the command line

PAGE = REPO / "docs" / "howto" / "many-machines.md"


def simulation() -> str:
    """The ```bash block of the page's "Try it on one machine" section."""
    section = PAGE.read_text().split("### Try it on one machine", 1)[1]
    return re.findall(r"^```bash[^\n]*\n(.*?)^```$", section, flags=re.S | re.M)[0]


@pytest.mark.skipif(
    not (shutil.which("gtool") and shutil.which("dask")), reason="the gtool and dask commands are not on PATH"
)
def test_the_local_simulation_runs_as_written(tmp_path):
    env = environment() | {"TMPDIR": str(tmp_path)}  # mktemp -d makes its folder under the test's
    status, output = run_script(simulation(), env, 300)
    assert status == 0, output
    assert "ok: no problems found" in output, output
    stores = list(tmp_path.glob("*/graph.zarr"))
    assert len(stores) == 1 and (stores[0] / "zarr.json").is_file()
