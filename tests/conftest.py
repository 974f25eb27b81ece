"""Shared fixtures: paths to the shared datasets and a store factory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gtool.preprocess.options import ShardOptions
from gtool.preprocess.pipeline import shard

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORA = SHARED / "datasets" / "planetoid" / "cora"


@pytest.fixture(autouse=True, scope="session")
def input_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Copies of compressed inputs go to a temporary cache ($GTOOL_CACHE), never to ./data/gtool-cache."""
    folder = tmp_path_factory.mktemp("gtool-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GTOOL_CACHE", str(folder))
        yield folder


@pytest.fixture
def cora_dir() -> Path:
    """The Cora Planetoid files, or a skip when ../shared is absent (a user's clone has none)."""
    if not CORA.is_dir():
        pytest.skip(f"Cora data not found at {CORA} (../shared is only present in the project workspace)")
    return CORA


def make_store(source: str, path: Path, **options) -> str:
    """Shard `source` into `path` with test-friendly defaults (one worker, no progress bars)."""
    options.setdefault("workers", 1)
    shard(source, str(path), ShardOptions(**options))
    return str(path)
