"""The stochastic block model with planted classes: deterministic, chunk-independent, learnable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gtool
from gtool.errors import InputError
from gtool.preprocess.sources import blocks
from gtool.preprocess.sources.generators import parse_generator
from gtool.preprocess.sources.sbm import SBM_HOMOPHILY, SBM_SIGNAL, sbm_classes
from gtool.preprocess.sources.sbm_tasks import UNKNOWN_SHARE, task_communities
from tests.support.reference import source_edges
from tests.support.stores import make_store


def edges(spec: str, edges_per_chunk: int) -> tuple[np.ndarray, np.ndarray]:
    chunks = parse_generator(spec).edge_chunks(edges_per_chunk)
    return np.concatenate([c.read().src for c in chunks]), np.concatenate([c.read().dst for c in chunks])


def test_the_graph_depends_on_the_seed_only_not_on_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "GENERATOR_BLOCK", 700)
    whole = edges("sbm:3000:5:7:3", 1 << 30)
    for per_chunk in (700, 2100):
        np.testing.assert_array_equal(edges("sbm:3000:5:7:3", per_chunk), whole)
    assert whole[0].size == 3000 * 7 // 2
    assert not np.array_equal(edges("sbm:3000:5:7:4", 1 << 30)[1], whole[1])


def test_classes_are_planted_in_edges_labels_and_features() -> None:
    n, k = 6000, 4
    source = parse_generator(f"sbm:{n}:{k}")
    labels = source.node_data().labels
    assert np.bincount(labels).tolist() == [n // k] * k
    src, dst = source_edges(source)
    assert abs(np.mean(labels[src] == labels[dst]) - (SBM_HOMOPHILY + (1 - SBM_HOMOPHILY) / k)) < 0.01
    data = source.node_data()
    features = data.features.read_rows(np.arange(n))
    on_class = np.arange(data.features.num_features)[None, :] % k == labels[:, None]
    signal = features[on_class].mean() - features[~on_class].mean()
    assert abs(signal - SBM_SIGNAL) < 0.01
    some = np.array([5, 17, 4000])
    np.testing.assert_array_equal(data.features.read_rows(some), features[some])
    np.testing.assert_array_equal(sbm_classes(some, n, k), labels[some])
    split = data.split
    assert sorted(np.unique(split).tolist()) == [0, 1, 2] and abs(np.mean(split == 0) - 0.6) < 0.01


@pytest.mark.parametrize("spec", ["sbm:100", "sbm:100:1", "sbm:10:40", "sbm:100:4:0", "sbm:x:4"])
def test_bad_specs_say_what_is_expected(spec: str) -> None:
    with pytest.raises(InputError, match="sbm"):
        parse_generator(spec)


@pytest.mark.integration
def test_a_short_training_run_learns_the_planted_classes(tmp_path: Path) -> None:
    store = make_store("sbm:3000:4", tmp_path / "sbm.zarr", tiles=2)
    log = tmp_path / "log.jsonl"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "gtool.cli",
            "train",
            store,
            "--grid",
            "1x1x1",
            "--epochs",
            "20",
            "--log",
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    summary = records[-1]["summary"]
    assert records[0]["accuracy"]["test"] < 0.7 and summary["test_at_best_valid"] >= 0.8, summary


def test_multi_label_tasks_follow_the_communities_of_the_same_graph() -> None:
    n, communities, tasks = 3000, 4, 9
    multi, single = (
        parse_generator(f"sbm-multi:{n}:{communities}:{tasks}:7:3"),
        parse_generator(f"sbm:{n}:4:7:3"),
    )
    for got, want in zip(
        edges(f"sbm-multi:{n}:4:{tasks}:7:3", 1 << 20), edges(f"sbm:{n}:4:7:3", 1 << 20), strict=True
    ):
        np.testing.assert_array_equal(got, want)
    data, planted = multi.node_data(), single.node_data()
    some = np.array([0, 5, 2999])
    np.testing.assert_array_equal(data.features.read_rows(some), planted.features.read_rows(some))
    np.testing.assert_array_equal(data.split, planted.split)
    labels, positive = data.labels, task_communities(communities, tasks, 3)
    assert labels.shape == (n, tasks) and labels.dtype == np.int64 and data.num_classes == tasks
    assert (positive.any(axis=0) & ~positive.all(axis=0)).all()  # every task has positive and negative nodes
    known = labels != -1
    assert abs(1 - known.mean() - UNKNOWN_SHARE) < 0.01
    expected = positive[planted.labels].astype(np.int64)
    np.testing.assert_array_equal(labels[known], expected[known])
    assert multi.describe()["tasks"] == tasks and multi.name == f"sbm-multi:{n}:4:{tasks}:7"


@pytest.mark.parametrize(
    "spec", ["sbm-multi:100:4", "sbm-multi:100:4:0", "sbm-multi:100:1:3", "sbm-multi:x:4:2"]
)
def test_bad_multi_label_specs_say_what_is_expected(spec: str) -> None:
    with pytest.raises(InputError, match="sbm"):
        parse_generator(spec)


@pytest.mark.integration
def test_a_multi_label_store_holds_n_by_k_labels_in_both_orders(tmp_path: Path) -> None:
    store = gtool.open_store(make_store("sbm-multi:600:3:5", tmp_path / "multi.zarr", tiles=2))
    assert store.num_classes == 5 and store.meta.labels.kind == "multi-label 0/1 int64[N, 5]"
    labels = gtool.labels(store)
    np.testing.assert_array_equal(labels, parse_generator("sbm-multi:600:3:5").node_data().labels)
    assert gtool.verify_store(store).ok
