"""bench.bench_fused on a tiny block: every variant runs and the table has their rows, and the fused pass
keeps nothing between forward and backward but the rows' inverse RMS."""

from __future__ import annotations

import sys

import pytest
import torch

from bench import bench_fused
from tests.trainer.nn.fused.cases import ALONE


def test_the_table_has_every_variant(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_fused", "--rows", "300", "--cols", "8", "--repeats", "1"])
    bench_fused.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("300 x 8 float32 on cpu")
    assert [line.split()[0] for line in lines[2:]] == list(bench_fused.VARIANTS)


def test_the_fused_pass_keeps_only_the_inverse_rms() -> None:
    given = bench_fused.inputs(1000, 16, torch.device("cpu"), torch.float32)
    figures = {name: bench_fused.measure(name, given, ALONE, 1) for name in ("fused", "unfused")}
    assert figures["fused"]["kept_mb"] * 2**20 == 1000 * 4
    assert figures["unfused"]["kept_mb"] * 2**20 >= 1000 * 16 * 5
