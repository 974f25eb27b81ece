"""`gtool stats --compare`: every scheme's tile counts, from the stored tiles, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from gtool.preprocess.permutation import SCHEMES, make_permutations
from gtool.stats.compare import COMPARED
from gtool.stats.report import collect_stats
from tests.stats.conftest import SEED, StatsStore, StoreCase, build
from tests.support.stores import StoreFactory


def original_entries(stats_store: StatsStore) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of every nonzero of A + I in original node ids, from the reassembled A0."""
    coo = stats_store.matrices[0].tocoo()
    return stats_store.store.perm("r")[coo.row], stats_store.store.perm("c")[coo.col]


def expected_counts(stats_store: StatsStore, scheme: str) -> dict[str, np.ndarray]:
    """T x T counts per matrix of `scheme` (store's seed), placing the original entries directly."""
    store = stats_store.store
    n, t, s = store.num_nodes, store.tiles, store.tile_size
    rows, cols = original_entries(stats_store)
    degrees = np.bincount(rows, minlength=n)
    pr, pc = make_permutations(scheme, n, SEED, degrees=degrees, tiles=t)
    ipr, ipc = np.argsort(pr), np.argsort(pc)
    counts = {"0": np.bincount(ipr[rows] // s * t + ipc[cols] // s, minlength=t * t).reshape(t, t)}
    if not np.array_equal(pr, pc):
        counts["1"] = np.bincount(ipc[rows] // s * t + ipr[cols] // s, minlength=t * t).reshape(t, t)
    return counts


@pytest.fixture(scope="module")
def compared(stats_store: StatsStore) -> dict[str, dict]:
    return {c["scheme"]: c for c in collect_stats(stats_store.store, compare=True)["compare"]}


def test_every_scheme_is_compared(stats_store: StatsStore, compared: dict[str, dict]) -> None:
    assert list(compared) == list(COMPARED)
    assert set(COMPARED) == set(SCHEMES)
    assert [s for s, c in compared.items() if c["stored"]] == [stats_store.case.perm]


def test_scheme_counts_match_numpy(stats_store: StatsStore, compared: dict[str, dict]) -> None:
    for scheme, result in compared.items():
        want = expected_counts(stats_store, scheme)
        assert sorted(result["matrices"]) == sorted(want)
        for m, counts in want.items():
            got = result["matrices"][m]
            assert np.array_equal(got["tile_nnz"], counts), (scheme, m)
            assert got["max_over_mean"] == pytest.approx(counts.max() / counts.mean())
            assert got["cv"] == pytest.approx(counts.std() / counts.mean())


def test_stored_scheme_reproduces_the_store(stats_store: StatsStore, compared: dict[str, dict]) -> None:
    store = stats_store.store
    own = compared[stats_store.case.perm]["matrices"]
    for m in store.matrices:
        assert np.array_equal(own[str(m)]["tile_nnz"], store.tile_nnz(m))


def test_compare_predicts_a_store_sharded_with_another_scheme(stores: StoreFactory) -> None:
    """Counting from a double store predicts the tiles the pipeline writes for balanced (same seed):
    degrees from the tiles equal the pipeline's own degree pass."""
    double = build(stores, StoreCase("rmat:9:4", 4, "double"))
    balanced = build(stores, StoreCase("rmat:9:4", 4, "balanced"))
    compared = {c["scheme"]: c for c in collect_stats(double.store, compare=True)["compare"]}
    for m in balanced.store.matrices:
        assert np.array_equal(
            compared["balanced"]["matrices"][str(m)]["tile_nnz"], balanced.store.tile_nnz(m)
        )


def test_plexus_figures_on_a_lattice(stores: StoreFactory) -> None:
    """grid:1000x1000, 8 x 8 tiles: one permutation gives (d + T) / (d + 1) within 2% (the self-loops all
    on the diagonal tiles), two give at most 1.01. A tile holds ~78,000 nonzeros, so random placement
    leaves ~0.4% noise per tile (sqrt of the count) and ~1% on the largest of 64: balanced (degrees
    3 to 5, nothing to balance) is held to 1.015."""
    lattice = build(stores, StoreCase("grid:1000x1000", 8, "double"), seed=1)
    n, t = lattice.store.num_nodes, lattice.store.tiles
    d = (lattice.matrices[0].nnz - n) / n
    report = collect_stats(lattice.store, compare=True)
    compared = {c["scheme"]: c["matrices"]["0"]["max_over_mean"] for c in report["compare"]}
    assert compared["single"] == pytest.approx((d + t) / (d + 1), rel=0.02)
    assert compared["double"] <= 1.01
    assert compared["balanced"] <= 1.015
