"""Ranks never outlive their launcher: `kill -9` of `gtool train` or `gtool predict` just after it starts
its ranks ends them all within seconds, and they publish nothing (issue 37, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gtool.trainer.launch import lineage
from tests.support.load import scaled
from tests.support.stores import StoreFactory

pytestmark = pytest.mark.integration  # runs the command line and its ranks

GTOOL = [sys.executable, "-m", "gtool.cli"]
MODEL = ["--layers", "2", "--hidden", "8"]


@pytest.fixture(scope="module")
def store(stores: StoreFactory) -> str:
    return stores("rmat:9:8", tiles=2, num_features=16, num_classes=4)


def session_processes(session: int) -> list[psutil.Process]:
    """The running processes of session `session` (a launcher started in a session of its own, and all
    that it started, wherever they were re-parented)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == session and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def kill_launcher_after_start(args: list[str], after: float = 0.5) -> int:
    """Run `gtool ARGS` in a session of its own, kill -9 its process `after` seconds after it says that
    it starts its ranks, and return the session."""
    run = subprocess.Popen(
        [*GTOOL, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert run.stderr is not None
    for line in run.stderr:
        if " local ranks for grid " in line:
            break
    else:
        raise AssertionError(f"gtool {args[0]} ended before starting its ranks (status {run.wait()})")
    time.sleep(after)
    run.kill()
    run.wait()
    return run.pid


def assert_gone_soon(session: int, timeout: float = 8.0) -> None:
    """The session's processes end within `timeout` seconds (times the machine's load)."""
    deadline = time.monotonic() + scaled(timeout)
    while (left := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for process in left:
        process.kill()  # not to leave them running when the test fails
    assert not left, f"{len(left)} processes outlived their killed launcher"


@pytest.mark.parametrize("after", [0.5, 4.0])
def test_train_ranks_die_with_their_launcher(store: str, tmp_path: Path, after: float) -> None:
    checkpoints = tmp_path / "checkpoints"
    args = ["train", store, "--grid", "2x1x1", *MODEL, "--epochs", "100000", "--checkpoint", str(checkpoints)]
    session = kill_launcher_after_start(args, after)
    assert_gone_soon(session)
    if after < 1:  # before the ranks could load and train: no checkpoint may appear, even later
        time.sleep(1.0)
        assert not (checkpoints / "latest.json").exists()


def test_predict_ranks_die_with_their_launcher_and_publish_nothing(store: str, tmp_path: Path) -> None:
    checkpoints, output = tmp_path / "checkpoints", tmp_path / "out.zarr"
    trained = subprocess.run(
        [*GTOOL, "train", store, *MODEL, "--epochs", "1", "--checkpoint", str(checkpoints)],
        capture_output=True,
        text=True,
    )
    assert trained.returncode == 0, trained.stderr
    args = ["predict", store, "--checkpoint", str(checkpoints), "-o", str(output), "--grid", "2x1x1"]
    session = kill_launcher_after_start(args)
    assert_gone_soon(session)
    time.sleep(1.0)
    assert not output.exists()


def test_a_rank_whose_launcher_is_gone_publishes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before publishing, for the moment between the launcher's death and the kernel's signal."""
    assert not lineage.orphaned()  # this process was started by no local launch
    monkeypatch.setattr(lineage, "_parent", os.getppid())
    lineage.refuse_orphaned("the prediction out.zarr")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    monkeypatch.setattr(lineage, "_parent", int(gone.stdout))  # re-parented: the launcher is gone
    with pytest.raises(lineage.Orphaned, match="started this rank is gone: the prediction out.zarr is not"):
        lineage.refuse_orphaned("the prediction out.zarr")
