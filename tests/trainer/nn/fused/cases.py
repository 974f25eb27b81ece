"""Blocks of a hidden activation and their ScaleGNN elementwise pass, run by an implementation and by the
plain torch specification: values and gradients side by side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gtool.trainer.comm.groups import AxisGroup
from gtool.trainer.comm.timing import PhaseTimer
from gtool.trainer.nn.dropout import MaskSpec, RowsBlock, keep_mask
from gtool.trainer.nn.dropout.masks import Block
from gtool.trainer.nn.fused import rms_relu_dropout_reference

CPU = torch.device("cpu")
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}
ALONE = AxisGroup(1, 0, None, PhaseTimer(CPU), CPU)
"""A column group of one rank: no communication."""


@dataclass(frozen=True)
class Case:
    """A block of `rows` x `cols` at global (row0, col0) of an activation of `width` real columns (the
    block's columns past it are zero), or at the rows `row_ids` (a mini-batch)."""

    rows: int
    cols: int
    width: int
    row0: int = 0
    col0: int = 0
    rate: float = 0.5
    residual: bool = False
    row_ids: bool = False
    dtype: torch.dtype = torch.float64
    seed: int = 0

    def placement(self) -> Block | RowsBlock:
        if self.row_ids:
            ids = torch.randperm(4 * self.rows + 7, generator=torch.Generator().manual_seed(self.seed))
            return RowsBlock(ids[: self.rows].sort().values + self.row0, self.col0, self.cols)
        return (self.row0, self.rows, self.col0, self.cols)

    def spec(self) -> MaskSpec:
        return MaskSpec.of(3, 1, 4, self.rate, self.width)

    def tensors(self) -> dict[str, torch.Tensor | None]:
        """z (zero past the real columns), gamma, the residual (or None) and the upstream gradient."""
        generator = torch.Generator().manual_seed(self.seed)

        def draw(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, dtype=self.dtype, generator=generator)

        z = draw(self.rows, self.cols)
        z[:, max(0, self.width - self.col0) :] = 0
        residual = draw(self.rows, self.cols) if self.residual else None
        return {"z": z, "gamma": draw(self.cols), "residual": residual, "grad": draw(self.rows, self.cols)}

    def keep(self) -> torch.Tensor:
        return keep_mask(self.spec(), self.placement(), CPU)


def run(
    function: Callable,
    case: Case,
    group: AxisGroup = ALONE,
    training: bool = True,
    **given: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """y and the gradients of z, gamma and the residual (zeros when there is none) after backward of grad."""
    tensors = {**case.tensors(), **given}
    inputs = {name: tensors[name].clone().requires_grad_() for name in ("z", "gamma")}
    residual = tensors["residual"]
    if residual is not None:
        residual = residual.clone().requires_grad_()
    y = function(
        inputs["z"],
        inputs["gamma"],
        group,
        case.width,
        case.spec(),
        case.placement(),
        residual,
        training=training,
    )
    y.backward(tensors["grad"])
    return {
        "y": y.detach(),
        "dz": inputs["z"].grad,
        "dgamma": inputs["gamma"].grad,
        "dresidual": torch.zeros(()) if residual is None else residual.grad,
    }


def reference(
    case: Case, group: AxisGroup = ALONE, training: bool = True, **given
) -> dict[str, torch.Tensor]:
    return run(rms_relu_dropout_reference, case, group, training, **given)


def assert_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], tolerance: float) -> None:
    """Every result within `tolerance` of the specification's, relative to its largest value."""
    for name, value in want.items():
        error = (got[name] - value).abs().max().item() / max(value.abs().max().item(), 1e-300)
        assert error <= tolerance, f"{name}: relative error {error:.3g}"
