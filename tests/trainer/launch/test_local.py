"""Local launches: thread shares, the resource tracker, memory refused before any rank starts, a supervisor
spawned before its ranks' arguments are known."""

from __future__ import annotations

import gc
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gtool.cli.autogrid import auto_grid
from gtool.errors import GtoolError
from gtool.trainer.launch.entry import Entry
from gtool.trainer.launch.local import (
    NOTES_STALE_S,
    LocalLaunch,
    launch_local,
    notes_folder,
    numba_share,
    quiet_resource_tracker,
    wait_for,
)

PID_MAX = (
    int(Path("/proc/sys/kernel/pid_max").read_text())
    if Path("/proc/sys/kernel/pid_max").exists()
    else 1 << 22
)


def test_spawned_ranks_share_numba_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.setattr("gtool.trainer.launch.local.available_cores", lambda: 8)
    with numba_share(2):
        assert os.environ["NUMBA_NUM_THREADS"] == "4"
    assert "NUMBA_NUM_THREADS" not in os.environ
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    with numba_share(16):
        assert os.environ["NUMBA_NUM_THREADS"] == "3"


def test_the_resource_tracker_of_spawned_ranks_keeps_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    with quiet_resource_tracker():
        assert os.environ["PYTHONWARNINGS"] == "ignore:resource_tracker:UserWarning"
    assert "PYTHONWARNINGS" not in os.environ
    monkeypatch.setenv("PYTHONWARNINGS", "error")  # the user's filters are kept, and come back
    with quiet_resource_tracker():
        assert os.environ["PYTHONWARNINGS"] == "error,ignore:resource_tracker:UserWarning"
    assert os.environ["PYTHONWARNINGS"] == "error"


def test_local_ranks_beyond_the_machines_memory_are_refused_before_any_starts() -> None:
    """`--grid auto --ranks 100000` planned for 100,000 ranks and would have spawned them all."""
    with pytest.raises(GtoolError, match="10000000 local ranks need at least .* GiB .* use a smaller grid"):
        launch_local(10_000_000, print)
    with pytest.raises(GtoolError, match="10000000 local ranks need"):  # before planning for them
        auto_grid(None, 10_000_000, None, print)


@pytest.mark.integration
def test_a_launch_closed_unused_ends_its_supervisor_and_leaves_nothing(tmp_path, monkeypatch) -> None:
    """The supervisor spawned before the launcher's checks: a refused run ends it, with no notes folder."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    launch = LocalLaunch(2, Entry("os.path", "join"))
    assert launch.supervisor.is_alive()
    launch.close()
    assert launch.supervisor.exitcode is not None
    assert launch.run_dir is None and list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_a_launch_runs_its_ranks_with_the_arguments_sent_later(tmp_path) -> None:
    out = tmp_path / "ranks"
    out.mkdir()
    with LocalLaunch(2, Entry("tests.trainer.launch.test_local", "touch_rank")) as launch:
        launch.run(str(out))
    assert sorted(p.name for p in out.iterdir()) == ["0", "1"]
    assert launch.run_dir is not None and not os.path.exists(launch.run_dir)


def touch_rank(env, folder: str) -> None:
    """A rank's main for the launch above: a file named after the rank."""
    open(os.path.join(folder, str(env.rank)), "w").close()


@pytest.mark.integration
def test_forked_ranks_collect_and_keep_their_supervisors_start_frozen(tmp_path) -> None:
    """The supervisor imports the ranks' code with collection held (gtool.collector) and settles before it
    forks them: they collect, and leave the frozen start-up they share with it alone."""
    with LocalLaunch(2, Entry("tests.trainer.launch.test_local", "collection_rank")) as launch:
        launch.run(str(tmp_path))
    assert sorted(p.read_text() for p in tmp_path.glob("rank-*")) == ["True True", "True True"]


def collection_rank(env, folder: str) -> None:
    """A rank's main for the launch above: whether it collects, and whether anything is frozen."""
    state = f"{gc.isenabled()} {gc.get_freeze_count() > 0}"
    with open(os.path.join(folder, f"rank-{env.rank}"), "w") as note:
        note.write(state)


def test_a_launch_removes_the_notes_folders_of_launchers_that_no_longer_run(tmp_path, monkeypatch) -> None:
    """Only this user's, on this machine, of a launcher whose pid is gone, untouched for a minute; the new
    one names this launcher."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    gone, host = PID_MAX + 1, socket.gethostname()  # a pid no process can have
    folders = {
        "gone": f"gtool-ranks-{gone}@{host}-a1b2",
        "running": f"gtool-ranks-{os.getppid()}@{host}-c3d4",
        "elsewhere": f"gtool-ranks-{gone}@another-{host}-e5f6",
        "unnamed": "gtool-ranks-g7h8",
        "touched": f"gtool-ranks-{gone}@{host}-i9j0",  # a launcher whose pid this process cannot see
    }
    for what, name in folders.items():
        (tmp_path / name).mkdir()
        if what != "touched":
            os.utime(tmp_path / name, (0, time.time() - 2 * NOTES_STALE_S))
    made = notes_folder()
    assert os.path.basename(made).startswith(f"gtool-ranks-{os.getpid()}@{host}-")
    kept = {path.name for path in tmp_path.iterdir()} - {os.path.basename(made)}
    assert kept == {name for what, name in folders.items() if what != "gone"}


def test_a_launcher_touches_its_notes_folder_while_it_waits(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("gtool.trainer.launch.local.NOTES_TOUCH_S", 0.0)
    os.utime(tmp_path, (0, 0))
    alive = iter([True, True, False])
    supervisor = SimpleNamespace(is_alive=lambda: next(alive), join=lambda timeout: None)
    wait_for(supervisor, str(tmp_path))
    assert time.time() - tmp_path.stat().st_mtime < NOTES_STALE_S
