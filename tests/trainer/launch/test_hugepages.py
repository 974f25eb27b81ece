"""The command asks torch for huge pages before any command imports it."""

from __future__ import annotations

import os

import pytest


def test_the_command_asks_for_huge_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from gtool.cli.main import main

    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    main(version=False)
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")
    main(version=False)
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"
