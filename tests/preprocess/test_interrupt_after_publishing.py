"""A signal that comes once the store is published (while the cluster stops, the summary prints or the
interpreter shuts down) ends `gtool shard` with status 0 and a notice that the store is complete."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from distributed import LocalCluster
from distributed.core import Status
from distributed.deploy.spec import SpecCluster
from typer.testing import CliRunner

from gtool import interrupts
from gtool.cli import shard as shard_command
from gtool.cli.main import app
from gtool.store.reader import open_store
from gtool.store.verify import verify_store
from gtool.store.writing.staging import StagedOutput
from tests.support.shard_runs import leftovers, start_shard

COMPLETE = "came after the store was published: {} is complete"


MOMENTS = {
    "published": (StagedOutput, "publish"),
    "cluster stopping": (LocalCluster, "close"),
    "summary": (shard_command, "print_summary"),
}


@pytest.mark.integration
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_signal_after_publishing_exits_0_saying_the_store_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """The signal comes once the step is over, or as the cluster starts to stop: the cluster still stops
    whole (raised inside Dask's shutdown, the signal left it half closed and Dask's exit hook waiting)."""
    owner, name = MOMENTS[moment]
    step = getattr(owner, name)

    def signalled(*args: object, **kwargs: object) -> object:
        if moment == "cluster stopping":
            os.kill(os.getpid(), signal.SIGTERM)
            return step(*args, **kwargs)
        step(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return None

    monkeypatch.setattr(owner, name, signalled)
    monkeypatch.setattr(interrupts.Interrupts, "abandon_later", lambda self, signum: None)  # no watchdog
    out = tmp_path / "s.zarr"
    big = "grid:370x370"  # 136,900 nodes: more than a run without a cluster takes (pipeline.SMALL_RUN)
    result = CliRunner().invoke(app, ["shard", big, "-o", str(out), "-t", "2x2", "-w", "1", "-q"])
    assert result.exit_code == 0, result.output
    assert f"notice: SIGTERM {COMPLETE.format(out)}" in " ".join(result.output.split())
    assert verify_store(open_store(str(out))).ok and leftovers(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert all(cluster.status == Status.closed for cluster in SpecCluster._instances)


@pytest.mark.integration
def test_the_gtool_program_signalled_as_its_store_appears_exits_0(tmp_path: Path) -> None:
    """As a user's script sees it: SIGTERM as soon as the store is at its path (the run then stops its
    cluster, prints the summary or shuts the interpreter down)."""
    out = tmp_path / "s.zarr"
    proc = start_shard(out, "rmat:12:8")
    while not out.exists() and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "terminated" not in stderr, stderr
    assert verify_store(open_store(str(out))).ok and leftovers(tmp_path) == []
