"""The epoch's phase accounting: nested phases pause the outer one, and "other" takes the rest."""

from __future__ import annotations

import pytest
import torch

from gtool.trainer.comm import timing
from gtool.trainer.comm.timing import PHASES, PhaseTimer


class FakeClock:
    """A perf_counter that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_nested_phases_count_each_second_once_and_add_up(clock: FakeClock) -> None:
    timer = PhaseTimer(torch.device("cpu"))
    clock.now = 1.0  # outside every phase: other
    with timer.phase("dense"):
        clock.now = 3.0
        with timer.phase("comm"):
            clock.now = 7.0
        clock.now = 8.0
    with timer.phase("reshard"):
        clock.now = 8.5
    clock.now = 10.0
    totals = timer.totals()
    assert set(totals) == set(PHASES)
    assert totals == {"spmm": 0.0, "dense": 3.0, "comm": 4.0, "reshard": 0.5, "other": 2.5}
    assert sum(totals.values()) == 10.0


def test_reset_starts_the_wall_clock_again(clock: FakeClock) -> None:
    timer = PhaseTimer(torch.device("cpu"))
    clock.now = 5.0
    timer.reset()
    with timer.phase("spmm"):
        clock.now = 6.0
    clock.now = 6.5
    assert timer.totals() == {"spmm": 1.0, "dense": 0.0, "comm": 0.0, "reshard": 0.0, "other": 0.5}


@pytest.mark.parametrize("name", ["other", "optimizer"])
def test_only_named_phases_are_entered(name: str) -> None:
    with pytest.raises(ValueError, match="not one of"), PhaseTimer(torch.device("cpu")).phase(name):
        pass
