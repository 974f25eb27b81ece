"""One writer per output: a second lock is refused naming its owner; a lock left by a killed run on this
host is taken over, one of another host kept."""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path

import pytest

from gtool.errors import GtoolError
from gtool.store.writing import output_lock
from gtool.store.writing.output_lock import OutputLock, OutputLockedError
from tests.support.shard_runs import LOCKED, leftovers


def test_a_second_lock_on_an_output_is_refused_naming_its_owner(tmp_path: Path) -> None:
    with OutputLock(tmp_path / "s.zarr"):
        owner = json.loads((tmp_path / ".s.zarr.lock").read_text())
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
        with pytest.raises(OutputLockedError, match=f"s.zarr: {LOCKED} \\(pid {os.getpid()} on host "):
            OutputLock(tmp_path / "s.zarr").__enter__()
    assert leftovers(tmp_path) == []
    with OutputLock(tmp_path / "s.zarr"):  # free again
        pass


def test_a_full_device_at_locking_is_one_error_and_frees_the_lock(tmp_path: Path, monkeypatch) -> None:
    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output_lock.os, "pwrite", full)
    with pytest.raises(GtoolError, match="s.zarr: no space left on the device"):
        OutputLock(tmp_path / "s.zarr").__enter__()
    assert leftovers(tmp_path) == []  # the lock file too (an empty one was left)
    monkeypatch.undo()
    with OutputLock(tmp_path / "s.zarr"):  # the failed attempt let go of the lock
        pass


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stale = {"pid": 999_999_999, "host": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00"}
    (tmp_path / ".s.zarr.lock").write_text(json.dumps(stale))
    with caplog.at_level("WARNING", logger="gtool"), OutputLock(tmp_path / "s.zarr"):
        assert json.loads((tmp_path / ".s.zarr.lock").read_text())["pid"] == os.getpid()
    assert "taking over the lock of a run that is gone (pid 999999999" in caplog.text
    assert leftovers(tmp_path) == []


def test_a_lock_file_of_another_host_is_refused_and_kept(tmp_path: Path) -> None:
    other = {"pid": 12, "host": "elsewhere", "started": "2026-01-01T00:00:00+00:00"}
    (tmp_path / ".s.zarr.lock").write_text(json.dumps(other))
    with pytest.raises(OutputLockedError, match="on another host .*pid 12 on host elsewhere"):
        OutputLock(tmp_path / "s.zarr").__enter__()
    assert json.loads((tmp_path / ".s.zarr.lock").read_text()) == other
