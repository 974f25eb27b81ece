"""Dropout masks: one global mask per layer and epoch, the same from the CPU kernels and the plain-torch
specification, statistically sound, and autograd functions that backpropagate through it exactly."""

from __future__ import annotations

import pytest
import torch

from gtool.trainer.nn.dropout import (
    NO_DROPOUT,
    MaskSpec,
    RowsBlock,
    backends,
    dropout,
    keep_mask,
    kernels,
    relu_dropout,
)

CPU = torch.device("cpu")
WIDTH = 13


def plain_dropout(x: torch.Tensor, spec: MaskSpec, block: tuple[int, int, int, int]) -> torch.Tensor:
    """The dropout the specification defines, in plain torch."""
    return torch.where(keep_mask(spec, block, CPU), x * spec.keep_value, 0.0)


def test_blocks_are_cut_from_one_global_mask() -> None:
    """Any block equals the same part of the whole layer input's mask (so every grid draws the same)."""
    spec = MaskSpec.of(7, 1, 4, 0.3, WIDTH)
    whole = keep_mask(spec, (0, 1500, 0, WIDTH), CPU)
    block = keep_mask(spec, (700, 600, 5, 10), CPU)
    assert torch.equal(block[:, :8], whole[700:1300, 5:13])
    assert not block[:, 8:].any(), "padding columns must be dropped"
    assert not torch.equal(whole, keep_mask(MaskSpec.of(7, 1, 5, 0.3, WIDTH), (0, 1500, 0, WIDTH), CPU))
    assert not torch.equal(whole, keep_mask(MaskSpec.of(7, 2, 4, 0.3, WIDTH), (0, 1500, 0, WIDTH), CPU))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_kernels_draw_the_specified_masks(dtype: torch.dtype) -> None:
    spec, block = MaskSpec.of(3, 2, 9, 0.4, WIDTH), (1000, 257, 4, 11)
    x = torch.randn(257, 11, dtype=dtype, generator=torch.Generator().manual_seed(0))
    assert torch.equal(kernels.scale(x, spec, block), plain_dropout(x, spec, block))
    out, flag = kernels.relu_scale(x, spec, block)
    assert torch.equal(flag, (x > 0) & keep_mask(spec, block, CPU))
    assert torch.equal(out, plain_dropout(torch.relu(x), spec, block))
    assert torch.equal(kernels.scale_flagged(x, flag, 2.5), torch.where(flag, x * 2.5, 0.0))
    relu, positive = kernels.relu_scale(x, NO_DROPOUT, block)
    assert torch.equal(relu, torch.relu(x)) and torch.equal(positive, x > 0)


def test_cpu_kernels_draw_the_specified_masks_of_any_rows() -> None:
    """A mini-batch's rows (places in the sample, not contiguous) get the specification's decisions."""
    spec = MaskSpec.of(3, 2, 9, 0.4, WIDTH, step=5)
    block = RowsBlock(torch.tensor([0, 3, 4, 70, 1 << 20, (1 << 32) - 1]), 4, 11)
    x = torch.randn(6, 11, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    keep = keep_mask(spec, block, CPU)
    assert torch.equal(kernels.scale(x, spec, block), torch.where(keep, x * spec.keep_value, 0.0))
    out, flag = kernels.relu_scale(x, spec, block)
    assert torch.equal(flag, (x > 0) & keep)
    assert torch.equal(out, torch.where(flag, x * spec.keep_value, 0.0))


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_masks_keep_the_right_share_without_correlations(rate: float) -> None:
    rows, cols = 20_000, 64
    keep = keep_mask(MaskSpec.of(11, 0, 1, rate, cols), (12_345, rows, 0, cols), CPU).double()
    share, n = keep.mean().item(), rows * cols
    sigma = (rate * (1 - rate) / n) ** 0.5
    assert abs(share - (1 - rate)) < 5 * sigma
    centered = keep - share
    variance = rate * (1 - rate)
    for name, a, b in [
        ("next row", centered[1:], centered[:-1]),
        ("next column", centered[:, 1:], centered[:, :-1]),
        ("row 2^10 further", centered[1024:], centered[:-1024]),
    ]:
        correlation = (a * b).mean().item() / variance
        assert abs(correlation) < 5 / a.numel() ** 0.5, f"{name}: correlation {correlation:.4f}"
    row_counts = keep.sum(dim=1)
    assert abs(row_counts.var().item() / (cols * variance) - 1) < 0.05, "row counts are not binomial"
    column_share = keep.mean(dim=0)
    assert (column_share - (1 - rate)).abs().max().item() < 5 * (variance / rows) ** 0.5


@pytest.mark.parametrize("device_path", ["kernels", "torch"])
def test_dropout_functions_backpropagate_through_the_mask(device_path: str) -> None:
    """Gradients equal those of the plain formula; with the torch path (what CUDA runs, and the CPU within
    `cpu_kernels(False)`) as well."""
    spec, block = MaskSpec.of(5, 1, 2, 0.5, WIDTH), (30, 40, 8, 7)
    x = torch.randn(40, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    upstream = torch.randn(40, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def plain_relu_dropout(t, s, b):
        return plain_dropout(t.relu(), s, b)

    for ours, plain in [(dropout, plain_dropout), (relu_dropout, plain_relu_dropout)]:
        got, want = x.clone().requires_grad_(), x.clone().requires_grad_()
        with backends.cpu_kernels(device_path == "kernels"):
            out, reference = ours(got, spec, block), plain(want, spec, block)
            assert torch.equal(out, reference)
            (out * upstream).sum().backward()
            (reference * upstream).sum().backward()
        assert torch.equal(got.grad, want.grad)
