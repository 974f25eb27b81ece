"""Shared fixtures and the split between unit and integration tests.

Unit tests start no Dask cluster and spawn no process; integration tests (marked `integration`) may.
A test that uses the session's shared stores (`stores`) is marked integration by itself; any other test
that builds a store, runs the command line or starts ranks carries the mark (usually its module's
`pytestmark`). An unmarked test that starts a cluster or a process fails, saying so.
`python -m pytest -m "not integration"` runs the unit tests alone.
"""

from __future__ import annotations

import multiprocessing.process
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import CORA, absent
from tests.support.stores import StoreFactory

INTEGRATION = "integration"
STORE_FIXTURES = {"stores"}
"""Fixtures whose users run the pipeline (through them): their tests are integration tests."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{INTEGRATION}: starts a Dask cluster or spawns processes (gtool shard, train ranks, the CLI)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if STORE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(INTEGRATION)


@pytest.fixture(autouse=True)
def unit_tests_stay_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse clusters and processes in tests not marked integration."""
    if request.node.get_closest_marker(INTEGRATION):
        return

    def refuse(what: str):
        def refused(*args: object, **kwargs: object) -> None:
            raise RuntimeError(
                f"{what} in a unit test: mark the test {INTEGRATION} (pytest.mark.{INTEGRATION})"
            )

        return refused

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("a process spawned"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("a process started"))
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(distributed.LocalCluster, "__init__", refuse("a Dask cluster started"))
    monkeypatch.setattr(distributed.Client, "__init__", refuse("a Dask client started"))


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> StoreFactory:
    """Stores sharded once per session by (source, options): stores("rmat:9:8", tiles=4) -> path."""
    return StoreFactory(tmp_path_factory.mktemp("stores"))


@pytest.fixture(autouse=True, scope="session")
def input_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Copies of compressed inputs go to a temporary cache ($GTOOL_CACHE), never to ./data/gtool-cache."""
    folder = tmp_path_factory.mktemp("gtool-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GTOOL_CACHE", str(folder))
        yield folder


@pytest.fixture(autouse=True, scope="session")
def temporary_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Temporary files of the tests and of the processes they start go to the session's folder ($TMPDIR),
    not the machine's: a launcher killed by SIGKILL leaves its ranks' notes folder, which nothing can
    remove then."""
    folder = tmp_path_factory.mktemp("tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.fixture
def cora_dir() -> Path:
    """The Cora Planetoid files, or a skip when ../shared is absent (a user's clone has none)."""
    if not CORA.is_dir():
        pytest.skip(f"Cora data: {absent(CORA)}")
    return CORA
