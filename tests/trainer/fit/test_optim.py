"""The trainer's Adam and AdamW against torch.optim."""

from __future__ import annotations

import pytest
import torch

from gtool.trainer.fit.optim import Adam


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_matches_torch_optim(kind: str) -> None:
    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(5, 3, generator=generator, dtype=torch.float64) for _ in range(2)]
    ours = [p.clone().requires_grad_() for p in start]
    theirs = [p.clone().requires_grad_() for p in start]
    optimizer = Adam([(ours[:1], 0.1), (ours[1:], 0.0)], lr=0.05, decoupled=kind == "adamw")
    reference_kind = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    reference = reference_kind(
        [{"params": theirs[:1], "weight_decay": 0.1}, {"params": theirs[1:], "weight_decay": 0.0}], lr=0.05
    )
    for step in range(4):
        for params in (ours, theirs):
            for i, param in enumerate(params):
                param.grad = torch.sin(param.detach() * (step + i + 1))
        optimizer.step()
        reference.step()
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
