"""The garbage collector held while a process starts and settled where its work begins (gtool.collector)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gtool.collector import held_again, hold, settle


@pytest.fixture(autouse=True)
def collection_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


def test_settle_freezes_what_exists_and_collects_again_after_a_hold() -> None:
    gc.unfreeze()
    hold()
    assert not gc.isenabled()
    settle()
    assert gc.isenabled() and gc.get_freeze_count() > 0


def test_settle_leaves_a_process_that_did_not_hold_as_it_was() -> None:
    """A test runner or an external Dask worker: nothing frozen, collection untouched."""
    gc.unfreeze()
    settle()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_late_imports_of_a_settled_process_are_held_and_frozen_too() -> None:
    gc.unfreeze()
    hold()
    settle()
    frozen = gc.get_freeze_count()
    with held_again():
        assert not gc.isenabled()
        late = [[] for _ in range(100)]
    assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(late)


def test_late_imports_leave_a_process_that_did_not_settle_as_it_was() -> None:
    gc.unfreeze()
    with held_again():
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0
