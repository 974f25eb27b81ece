"""A rank names the peer whose process ended, even when that process is still ending as it looks."""

from __future__ import annotations

import subprocess

import pytest

from gtool.trainer.launch import peers

pytestmark = pytest.mark.integration  # starts a process to stand for a peer rank


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch):
    """Rank 1: a process that ends half a second after it starts."""
    process = subprocess.Popen(["sleep", "0.5"])
    monkeypatch.setattr(peers, "_local", {1: process.pid})
    yield process
    process.kill()
    process.wait()


def test_a_peer_still_running_is_not_named(peer: subprocess.Popen) -> None:
    assert peers.gone_peers() == []


def test_a_peer_that_ends_within_the_patience_is_named(peer: subprocess.Popen) -> None:
    """A killed rank's connections close before it is seen to end: its peer's error came first, and the
    rank that saw it named itself."""
    assert peers.gone_peers(patience=30.0) == [1]
    assert peer.poll() is not None or peers._ended(peer.pid)


def test_a_reaped_peer_is_named(peer: subprocess.Popen) -> None:
    peer.wait()
    assert peers.gone_peers() == [1]


def test_a_local_launch_has_no_peers_to_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "_local", {})
    assert peers.gone_peers(patience=30.0) == []
