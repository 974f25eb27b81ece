"""The Triton passes of the CUDA path, checked without a GPU: run by Triton's interpreter on CPU tensors
they equal the plain torch specification (values, gradients, masks bit for bit; padded columns, two
column tiles, rows past 2^31, mini-batch rows), a forward is two launches and a backward two, and the
kernels compile for real GPUs. On a machine with CUDA the compiled kernels are checked too."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import torch

from gtool.trainer.nn.fused import backends, rms_relu_dropout
from tests.support.triton import fresh_modules
from tests.trainer.nn.fused.cases import ALONE, TOLERANCE, Case, assert_close, reference, run

triton = pytest.importorskip(
    "triton", reason="triton is not installed (gtool's gpu or dev extra): CUDA fused kernels unchecked"
)

MODULES = ["gtool.trainer.nn.dropout.triton_kernels", "gtool.trainer.nn.fused.triton_kernels"]
"""The fused kernels call the dropout kernels' decisions: both are imported anew, in this order."""
CASES = [
    Case(45, 21, 18, row0=(1 << 31) - 20, col0=2, residual=True),
    Case(19, 131, 140, col0=7),
    Case(37, 13, 13, row_ids=True, residual=True),
    Case(9, 5, 5, rate=0.0),
]
"""Padded columns; two column tiles (131 columns); mini-batch rows; no dropout."""
KERNELS = ["_row_squares_kernel", "_forward_kernel", "_backward_sums_kernel", "_backward_input_kernel"]


def _name(case: Case) -> str:
    rows = "ids" if case.row_ids else f"row{case.row0}"
    return f"{case.rows}x{case.cols}-{rows}-rate{case.rate}" + ("-residual" if case.residual else "")


@pytest.fixture(scope="module")
def interpreted() -> Iterator[ModuleType]:
    with fresh_modules(MODULES, interpret=True) as (_, module):
        yield module


@pytest.fixture
def triton_passes(interpreted: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The interpreted Triton passes as what every block gets (as CUDA blocks do)."""
    monkeypatch.setattr(backends, "passes_for", lambda z, gamma, residual: interpreted)
    return interpreted


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_interpreted_passes_equal_the_specification(triton_passes, case: Case, dtype: torch.dtype) -> None:
    case = Case(**{**case.__dict__, "dtype": dtype})
    got, want = run(rms_relu_dropout, case), reference(case)
    assert_close(got, want, TOLERANCE[dtype])
    if not case.residual:
        assert torch.equal(got["y"] != 0, want["y"] != 0), "another mask than the specification's"


class _Launches:
    """A kernel whose launches are recorded by name."""

    def __init__(self, kernel, name: str, launches: list[str]):
        self.kernel, self.name, self.launches = kernel, name, launches

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(self.name)
            return self.kernel[grid](*args, **kwargs)

        return launch


def test_one_launch_per_pass(triton_passes, monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[str] = []
    for name in KERNELS:
        monkeypatch.setattr(triton_passes, name, _Launches(getattr(triton_passes, name), name, launches))
    case = Case(30, 12, 12, residual=True, dtype=torch.float32)
    tensors = case.tensors()
    z = tensors["z"].clone().requires_grad_()
    gamma = tensors["gamma"].clone().requires_grad_()
    y = rms_relu_dropout(z, gamma, ALONE, case.width, case.spec(), case.placement(), tensors["residual"])
    assert launches == KERNELS[:2]
    y.backward(tensors["grad"])
    assert launches == KERNELS


@pytest.mark.integration
def test_kernels_compile_for_gpus() -> None:
    """The kernels compile ahead of time, float32 for an A100 (sm_80) and float64 for an H100 (sm_90), no
    GPU needed (integration: Triton runs ptxas)."""
    compiler = pytest.importorskip("triton.compiler")
    from triton.backends.compiler import GPUTarget

    with fresh_modules(MODULES, interpret=False) as (dropout_kernels, kernels):
        ints = {"rows": "i32", "cols": "i32"} | {name: "i64" for name in dropout_kernels.PER_CALL}
        constants = {"RESIDUAL": True, "ROW_IDS": True, "DROPPING": True, "BLOCK_ROWS": 32, "BLOCK_COLS": 128}
        constants |= {"ROW_TILES": 32}
        for name in KERNELS:
            for dtype, capability in [("fp32", 80), ("fp64", 90)]:
                kernel = getattr(kernels, name)
                here = {
                    a: v
                    for a, v in {**constants, "FLOAT64": dtype == "fp64"}.items()
                    if a in kernel.arg_names
                }
                signature = {
                    a: "constexpr" if a in here else ints.get(a, "*i64" if a == "row_ids" else f"*{dtype}")
                    for a in kernel.arg_names
                }
                source = compiler.ASTSource(fn=kernel, signature=signature, constexprs=here)
                compiled = triton.compile(
                    source, target=GPUTarget("cuda", capability, 32), options={"enable_fp_fusion": False}
                )
                assert compiled.asm["cubin"], f"{name} {dtype} for sm_{capability}"


@pytest.mark.integration  # Triton runs ldconfig and ptxas
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_kernels_equal_the_specification(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU: the compiled passes against the specification, on blocks of a realistic size too."""
    device = torch.device("cuda")
    with fresh_modules(MODULES, interpret=False) as (_, kernels):
        monkeypatch.setattr(backends, "passes_for", lambda z, gamma, residual: kernels)
        for case in [
            *CASES,
            Case(100_003, 128, 128, row0=12_345, residual=True),
            Case(5000, 200, 190, row_ids=True),
        ]:
            for dtype in (torch.float32, torch.float64):
                typed = Case(**{**case.__dict__, "dtype": dtype})
                given = {k: None if v is None else v.to(device) for k, v in typed.tensors().items()}
                got, want = run(rms_relu_dropout, typed, **given), reference(typed, **given)
                assert_close(got, want, TOLERANCE[dtype])
