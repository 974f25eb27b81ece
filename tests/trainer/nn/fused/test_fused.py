"""The fused RMSNorm + ReLU + dropout (+ residual) pass on the CPU (numba) against its plain torch
specification: values and gradients, the specification's masks bit for bit, padded columns, mini-batch
rows, eval mode, only z and the inverse RMS kept for backward, and the specification where no kernel
applies."""

from __future__ import annotations

import numba
import pytest
import torch

from gtool.trainer.nn.fused import backends, kernels, rms_relu_dropout
from tests.trainer.nn.fused.cases import ALONE, TOLERANCE, Case, assert_close, reference, run

CASES = [
    Case(1, 1, 1),
    Case(257, 13, 13, row0=1000),
    Case(300, 16, 11, row0=(1 << 31) - 20, col0=3, residual=True),
    Case(40, 21, 50, col0=29, rate=0.0, residual=True),
    Case(2100, 7, 5, row_ids=True, residual=True),
    Case(33, 9, 9, row0=(1 << 32) - 33, row_ids=True, rate=0.0),
]
"""Odd sizes; padded columns (width < col0 + cols); rows past 2^31 and ending at 2^32 - 1; more rows
than one chunk of backward's column sums; mini-batch rows."""


def _name(case: Case) -> str:
    rows = "ids" if case.row_ids else f"row{case.row0}"
    residual = "-residual" if case.residual else ""
    return f"{case.rows}x{case.cols}-width{case.width}-{rows}-col{case.col0}-rate{case.rate}{residual}"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_cpu_pass_equals_the_specification(case: Case, dtype: torch.dtype) -> None:
    case = Case(**{**case.__dict__, "dtype": dtype})
    assert backends.passes_for(*(case.tensors()[name] for name in ("z", "gamma", "residual"))) is kernels
    got, want = run(rms_relu_dropout, case), reference(case)
    assert_close(got, want, TOLERANCE[dtype])
    assert torch.equal(got["dresidual"], want["dresidual"])
    if not case.residual:
        assert torch.equal(got["y"] != 0, want["y"] != 0), "another mask than the specification's"


def test_dropout_decisions_are_the_masks_of_the_specification() -> None:
    """Where the normalized, scaled value is positive, y is nonzero exactly where keep_mask keeps."""
    case = Case(500, 24, 20, row0=77, col0=4)
    tensors = case.tensors()
    z, gamma = tensors["z"], tensors["gamma"]
    y = run(rms_relu_dropout, case, gamma=gamma.abs() + 0.1)["y"]
    positive = z > 0
    kept = case.keep()
    assert torch.equal(y != 0, positive & kept)
    assert int((positive & ~kept).sum()) > 0, "a vacuous comparison"
    assert torch.equal(y[:, 16:], torch.zeros_like(y[:, 16:])), "padded columns must stay zero"


def test_eval_mode_and_rate_zero_drop_nothing() -> None:
    case = Case(64, 8, 8, residual=True)
    evaluated = run(rms_relu_dropout, case, training=False)
    assert_close(evaluated, reference(Case(64, 8, 8, residual=True, rate=0.0)), TOLERANCE[torch.float64])
    assert_close(evaluated, reference(case, training=False), TOLERANCE[torch.float64])


def test_backward_keeps_only_z_and_the_inverse_rms() -> None:
    """What autograd holds between forward and backward: z, the rows' inverse RMS and the parameter."""
    case = Case(50, 6, 6, residual=True)
    tensors = case.tensors()
    z = tensors["z"].clone().requires_grad_()
    gamma = tensors["gamma"].clone().requires_grad_()
    y = rms_relu_dropout(z, gamma, ALONE, case.width, case.spec(), case.placement(), tensors["residual"])
    saved = y.grad_fn.saved_tensors
    assert [tuple(t.shape) for t in saved] == [(50, 6), (50,), (6,)]
    assert saved[0].data_ptr() == z.data_ptr() and saved[2].data_ptr() == gamma.data_ptr()


def test_column_sums_do_not_depend_on_the_threads() -> None:
    """Backward's partial column sums are per chunk of rows, never shared by threads: every thread count
    gives the same bits."""
    case = Case(5 * kernels.CHUNK_ROWS + 3, 12, 12)
    tensors = case.tensors()
    z, gamma, grad = (tensors[name] for name in ("z", "gamma", "grad"))
    scales = torch.rand(case.rows, dtype=z.dtype) + 0.5
    results = []
    for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            results.append(kernels.backward_sums(z, scales, gamma, grad, case.spec(), case.placement()))
        finally:
            torch.set_num_threads(previous)
    for row_dots, column_sums in results[1:]:
        assert torch.equal(row_dots, results[0][0]) and torch.equal(column_sums, results[0][1])


def test_other_dtypes_and_mixed_blocks_use_the_specification() -> None:
    case = Case(30, 5, 5, residual=True, dtype=torch.float32)
    tensors = case.tensors()
    z, gamma, residual = (tensors[name] for name in ("z", "gamma", "residual"))
    assert backends.passes_for(z.bfloat16(), gamma.bfloat16(), None) is None
    assert backends.passes_for(z, gamma.double(), None) is None
    assert backends.passes_for(z, gamma, residual.double()) is None
    bf16 = {"z": z.bfloat16(), "gamma": gamma, "residual": residual.bfloat16()}
    got = run(rms_relu_dropout, case, **bf16)
    want = reference(case, **bf16)
    for name in want:
        assert torch.equal(got[name], want[name]), name
    assert got["y"].dtype == torch.bfloat16


def test_blocks_that_do_not_fit_their_placement_are_refused() -> None:
    case = Case(10, 4, 4)
    tensors = case.tensors()
    z, gamma = tensors["z"], tensors["gamma"]
    with pytest.raises(ValueError, match=r"z of shape \(10, 4\) does not fit a block of 10 rows x 5 columns"):
        rms_relu_dropout(z, torch.ones(5, dtype=z.dtype), ALONE, 5, case.spec(), (0, 10, 0, 5))
    with pytest.raises(ValueError, match=r"gamma of shape \(3,\)"):
        rms_relu_dropout(z, gamma[:3], ALONE, 4, case.spec(), case.placement())
    with pytest.raises(ValueError, match=r"a residual of shape \(10, 3\)"):
        rms_relu_dropout(z, gamma, ALONE, 4, case.spec(), case.placement(), z[:, :3])
