"""Storage failures told as one error line naming the place with least space."""

from __future__ import annotations

import errno
import gc
import weakref
from types import SimpleNamespace

import pytest

from gtool.store.writing import staging


def test_a_full_device_that_names_no_file_is_the_place_with_least_space(monkeypatch: pytest.MonkeyPatch):
    free = {"/data/out": 900 << 30, "/scratch": 3 << 20, "/data/cache": 900 << 30}
    monkeypatch.setattr(staging.shutil, "disk_usage", lambda folder: SimpleNamespace(free=free[folder]))
    places = {"the output's folder": "/data/out", "--spill-dir": "/scratch", "the cache": "/data/cache"}
    error = staging.storage_error(OSError("16384 requested and 4080 written"), "/data/out/s.zarr", places)
    expected = "/scratch (--spill-dir, 3.0 MiB free after removing this run's files): a short"
    assert str(error).startswith(expected)
    named = staging.storage_error(
        OSError(errno.ENOSPC, "No space left", "/data/out/x"), "/data/out/s", places
    )
    assert str(named).startswith("/data/out/x: no space left on the device")
    denied = staging.storage_error(OSError(errno.EACCES, "Permission denied"), "/data/out/s.zarr", places)
    assert str(denied).startswith("/data/out/s.zarr: permission denied")


class Cycle:
    """An object that a reference cycle holds (as a failed run's frames hold memory maps)."""

    itself: Cycle


def test_the_free_space_of_a_full_device_counts_what_only_garbage_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memory maps of removed spill files that only the failed run's reference cycles held kept their
    blocks (an 8 MiB tmpfs was said to have 6 MiB free): garbage is collected before the space is asked,
    and the figure is not rounded down to whole MiB."""
    collected, seen = [], []
    cycle = Cycle()
    cycle.itself = cycle
    weakref.finalize(cycle, collected.append, "mapped spill file")
    del cycle

    def usage(folder: str) -> SimpleNamespace:
        seen.append(list(collected))
        return SimpleNamespace(free=31 << 18)  # 7.75 MiB

    monkeypatch.setattr(staging.shutil, "disk_usage", usage)
    gc.disable()
    try:
        place = staging.fullest({"the output's folder": "/data/out"})
    finally:
        gc.enable()
    assert seen == [["mapped spill file"]]
    assert place == "/data/out (the output's folder, 7.8 MiB free after removing this run's files)"
