"""The garbage collector held while a process starts and settled where its work begins (gtool.collector)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from gtool.collector import hold, paused, settle


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


def test_late_imports_of_a_settled_process_are_made_without_collection_and_not_frozen() -> None:
    """A rank's late numba start: the run's data exists by then, and must not be frozen with it."""
    gc.unfreeze()
    hold()
    settle()
    frozen = gc.get_freeze_count()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_late_imports_leave_a_process_that_did_not_settle_as_it_was() -> None:
    gc.unfreeze()
    with paused():
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0
