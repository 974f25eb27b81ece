"""The typed store metadata refuses records that would read as other numbers."""

from __future__ import annotations

import numpy as np
import pytest

from bench.plan_metadata import metadata_only
from gtool.errors import StoreError
from gtool.store.metadata import (
    Fields,
    MatrixStats,
    StoreMeta,
    node_order_options,
    same_node_order,
    tile_stats,
)
from gtool.store.values import permutations_digest


def test_tile_counts_must_be_integers_and_stay_read_only() -> None:
    good = tile_stats(np.array([[1, 2], [3, 4]]))
    stats = MatrixStats.from_dict(good, "s", "stats.0.")
    with pytest.raises(ValueError, match="read-only"):
        stats.tile_nnz[0, 0] = 0  # Store.tile_nnz hands this array out: the frozen record must not change
    for counts in ([[1, 2.5], [3, 4]], [["1", 2], [3, 4]], [[1, 2]]):
        with pytest.raises(
            StoreError, match=r"s: metadata 'stats.0.tile_nnz' is not a T x T array of counts"
        ):
            MatrixStats.from_dict({**good, "tile_nnz": counts}, "s", "stats.0.")


def test_a_nested_record_that_is_not_an_object_is_named() -> None:
    with pytest.raises(StoreError, match="s: metadata 'source' is 'abc', expected an object"):
        Fields({"source": "abc"}, "s").nested("source")


def test_an_unknown_permutation_scheme_is_refused() -> None:
    record = metadata_only(nodes=100, edges=300, features=4, classes=2, tiles=2).to_dict()
    assert StoreMeta.from_dict(record, "s").permutation.scheme == "double"
    record["permutation"]["scheme"] = "weird"
    with pytest.raises(StoreError, match="s: metadata 'permutation.scheme' is 'weird', expected one of"):
        StoreMeta.from_dict(record, "s")


def test_the_node_order_is_the_scheme_and_seed_and_t_where_the_scheme_follows_the_tiles() -> None:
    record = metadata_only(nodes=100, edges=300, features=4, classes=2, tiles=2).to_dict()
    assert StoreMeta.from_dict(record, "s").node_order == {"scheme": "double", "seed": 0}
    record["permutation"] = {"scheme": "balanced", "seed": 3}
    order = StoreMeta.from_dict(record, "s").node_order
    assert order == {"scheme": "balanced", "seed": 3, "tiles": 2}
    assert node_order_options(order) == "--perm balanced --seed 3 --tiles 2"


def test_the_node_order_is_identified_by_the_digest_of_the_permutations() -> None:
    """The options do not decide the positions (--perm balanced follows the degrees): the digest does."""
    pr, pc = np.random.default_rng(0).permutation(100), np.random.default_rng(1).permutation(100)
    digest = permutations_digest(pr, pc)
    assert digest == permutations_digest(pr.astype(np.int32), pc) != permutations_digest(pc, pr)
    record = metadata_only(nodes=100, edges=300, features=4, classes=2, tiles=2).to_dict()
    record["permutation"] = {"scheme": "balanced", "seed": 3, "digest": digest}
    meta = StoreMeta.from_dict(record, "s")
    assert meta.to_dict()["permutation"] == record["permutation"]
    order = meta.node_order
    assert order == {"scheme": "balanced", "seed": 3, "tiles": 2, "digest": digest}
    shown = f"--perm balanced --seed 3 --tiles 2 (permutations digest {digest[:8]})"
    assert node_order_options(order) == shown
    moved = {**order, "digest": permutations_digest(pr[::-1], pc)}
    assert same_node_order(order, order) and not same_node_order(order, moved)
    before = {"scheme": "balanced", "seed": 3, "tiles": 2}  # a checkpoint written before digests were
    assert same_node_order(before, moved) and not same_node_order(before, {**moved, "seed": 4})
    for bad in ("", "XYZ", 12):
        record["permutation"]["digest"] = bad
        with pytest.raises(StoreError, match="metadata 'permutation.digest' is .*, expected"):
            StoreMeta.from_dict(record, "s")
