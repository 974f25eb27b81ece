"""bench.bench_accuracy: it says so and stops without Cora, and both sides train and give an accuracy."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_accuracy
from bench.scalegnn_reference import Graph, Hyper, train
from tests.support.stores import StoreFactory


def test_without_cora_the_bench_says_it_skipped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bench_accuracy.main(["--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.startswith(f"skipped: Cora is not in {tmp_path / 'planetoid' / 'cora'} (missing ind.cora.x")


def test_both_sides_train_a_few_epochs(stores: StoreFactory) -> None:
    store = stores("sbm:600:3")
    hyper = Hyper(layers=2, hidden=8, epochs=3)
    ours = bench_accuracy.gtool_accuracy(Path(store), hyper, seed=0)
    theirs = train(Graph.of_store(store), hyper, seed=0)
    assert 0.0 <= ours <= 1.0 and 0.0 <= theirs <= 1.0
