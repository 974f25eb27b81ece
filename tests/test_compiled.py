"""numba's kernels cached outside the source tree and compiled once per machine (gtool.compiled)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gtool import compiled, usercache
from gtool.terminal import QUIET_ENV
from gtool.version import __version__

REPO = Path(compiled.PACKAGE).parent
NOTICE_START = compiled.NOTICE.split("(")[0]
CALL_A_KERNEL = (
    "import numpy as np; from gtool.preprocess.kernels.compiled.tiles import split; "
    "split(np.arange(10, dtype=np.int64), 4)"
)
"""A process that calls one of gtool's kernels (a small serial one: quick to compile)."""


def kernel_process(cache: Path) -> subprocess.Popen:
    """A Python process calling a kernel, its cache in `cache`, its stderr piped (not quieted, though an
    in-process `-q` of an earlier test set GTOOL_QUIET here), in a process group of its own: a notice said
    in pytest's group (an earlier test compiling in this process) stands for its whole group."""
    environment = {key: value for key, value in os.environ.items() if key != QUIET_ENV}
    environment[usercache.CACHE_ENV] = str(cache)
    return subprocess.Popen(
        [sys.executable, "-c", CALL_A_KERNEL],
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def notices(*processes: subprocess.Popen) -> int:
    """How many notices the processes printed, once they all ended well."""
    errors = [process.communicate()[1] for process in processes]
    assert all(process.returncode == 0 for process in processes), errors
    return sum(error.count(NOTICE_START) for error in errors)


def test_the_cache_is_gtool_caches_folder_when_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(usercache.CACHE_ENV, str(tmp_path))
    assert compiled.kernel_cache_folder() == tmp_path / "numba"


def test_the_cache_is_the_users_cache_folder_outside_the_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(usercache.CACHE_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    folder = compiled.kernel_cache_folder()
    assert folder == Path.home() / ".cache" / "gtool" / "numba"
    assert not folder.resolve().is_relative_to(REPO.resolve())
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert compiled.kernel_cache_folder() == Path("/somewhere/gtool/numba")


def test_a_kernels_folder_is_its_versions_room_whatever_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every checkout of a version shares a room's folder; a file outside the package is numba's own."""
    from gtool.preprocess.kernels.compiled import tiles

    monkeypatch.setenv(usercache.CACHE_ENV, str(tmp_path))
    function = tiles.split.py_func
    locator = compiled.SharedLocator.from_function(function, function.__code__.co_filename)
    assert locator is not None
    assert Path(locator.get_cache_path()) == tmp_path / "numba" / __version__ / "preprocess/kernels/compiled"
    elsewhere = tmp_path / "checkout" / "kernels.py"
    elsewhere.parent.mkdir()
    elsewhere.write_text("")
    assert compiled.SharedLocator.from_function(function, str(elsewhere)) is None


@pytest.mark.integration
def test_a_kernel_compiles_once_with_a_notice_then_loads_silently(tmp_path: Path) -> None:
    first, second = kernel_process(tmp_path), kernel_process(tmp_path)
    assert notices(first, second) == 1  # at once: one compiles, the other waits, then loads
    written = tmp_path / "numba" / __version__ / "preprocess" / "kernels" / "compiled"
    assert any(written.glob("tiles.split-*.nbi"))
    assert notices(kernel_process(tmp_path)) == 0
    assert not list((REPO / "preprocess" / "kernels" / "compiled").glob("__pycache__/*.nbi"))
