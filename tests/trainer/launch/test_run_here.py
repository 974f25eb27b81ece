"""A rank of torchrun's that its launcher stopped after a peer died names that peer; a hangup, which every
rank of the terminal's group receives at once, stays the hangup however quickly a peer went."""

from __future__ import annotations

import signal

import pytest

from gtool.errors import Terminated
from gtool.trainer.launch import joined
from gtool.trainer.launch.environment import RankEnv
from gtool.trainer.launch.failures import RankFailed

ENV = RankEnv(0, 2, 0, "127.0.0.1", 29500, "torchrun")


def stopped_by(signum: int):
    def main(env: RankEnv) -> None:
        raise Terminated(f"terminated by {signal.Signals(signum).name}", signum)

    return main


def test_a_rank_torchrun_stopped_after_a_peer_died_names_the_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(joined, "gone_peers", lambda: [1])
    with pytest.raises(RankFailed, match="its process ended; then torchrun stopped rank 0"):
        joined.run_here(ENV, stopped_by(signal.SIGTERM))


def test_a_hangup_stays_a_hangup_when_a_peer_went_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(joined, "gone_peers", lambda: [1])
    with pytest.raises(Terminated) as ended:
        joined.run_here(ENV, stopped_by(signal.SIGHUP))
    assert ended.value.signum == signal.SIGHUP
