"""Skip reasons name the project's shared data as the repository sees it: they printed this machine's
absolute paths (/work/.../shared/datasets/...)."""

from __future__ import annotations

from tests.support.paths import CORA, absent


def test_a_missing_shared_dataset_is_named_relative_to_the_repository() -> None:
    assert absent(CORA) == (
        "../shared/datasets/planetoid/cora not found (../shared is only present in the project workspace)"
    )
