"""Local launches: thread shares, the resource tracker, memory refused before any rank starts."""

from __future__ import annotations

import os

import pytest

from gtool.cli.autogrid import auto_grid
from gtool.errors import GtoolError
from gtool.trainer.launch.local import launch_local, numba_share, quiet_resource_tracker


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
