"""The Triton dropout kernels of the CUDA path, checked without a GPU: run by Triton's interpreter on CPU
tensors they give bit for bit the masks of the torch specification (odd block sizes, rows past 2^31,
every rate), the autograd functions launch one kernel per pass and allocate nothing but the pass's
results, and the kernels compile for real GPUs. On a machine with CUDA the compiled kernels are checked
against the specification too."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gtool.trainer.nn.dropout import NO_DROPOUT, MaskSpec, backends, dropout, keep_mask, relu_dropout
from tests.support.triton import fresh_modules

triton = pytest.importorskip(
    "triton", reason="triton is not installed (gtool's gpu or dev extra): CUDA dropout kernels unchecked"
)

KERNELS = "gtool.trainer.nn.dropout.triton_kernels"
RATES = [0.0, 1e-10, 0.3, 0.5, 0.99, 1 - 2**-20, 1 - 1e-10]
"""0; a rate whose threshold rounds to 0; usual ones; near 1, down to the threshold clamped at 2^32 - 1."""
BLOCKS = [
    (0, 1, 0, 1),
    (1000, 37, 4, 13),
    ((1 << 31) - 20, 45, 0, 21),
    ((1 << 31) + 5, 19, 190, 131),
    ((1 << 32) - 300, 300, 7, 3),
]
"""(first row, rows, first column, columns): odd sizes, a block across row 2^31, one past it, one ending
at row 2^32 - 1; 131 columns take two column tiles."""
WIDTH = 200
"""Columns of the layer input: the second block has padding columns past it."""


@contextlib.contextmanager
def fresh_kernels(interpret: bool) -> Iterator[ModuleType]:
    """The kernels module imported anew, for Triton's interpreter or for the compiler."""
    with fresh_modules([KERNELS], interpret) as (module,):
        yield module


@pytest.fixture(scope="module")
def interpreted() -> Iterator[ModuleType]:
    with fresh_kernels(interpret=True) as module:
        yield module


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bits (so that -0.0 differs from 0.0 and nothing is compared as floats)."""
    return tensor.view({torch.float32: torch.int32, torch.float64: torch.int64}[tensor.dtype])


def assert_passes_match_the_specification(kernels: ModuleType, x: torch.Tensor, spec: MaskSpec, block):
    keep = keep_mask(spec, block, x.device)
    assert torch.equal(bits(kernels.scale(x, spec, block)), bits(torch.where(keep, x * spec.keep_value, 0.0)))
    out, flag = kernels.relu_scale(x, spec, block)
    assert torch.equal(flag, (x > 0) & keep)
    assert torch.equal(bits(out), bits(torch.where(flag, x * spec.keep_value, 0.0)))
    grad = torch.randn(x.shape[1], x.shape[0], dtype=x.dtype, device=x.device).t()
    got = kernels.scale_flagged(grad, flag, spec.keep_value)
    assert torch.equal(bits(got), bits(torch.where(flag, grad * spec.keep_value, 0.0)))


@pytest.mark.parametrize(
    ("rate", "dtype"),
    [(rate, torch.float32) for rate in RATES] + [(0.5, torch.float64), (RATES[-1], torch.float64)],
)
def test_interpreted_kernels_draw_the_specified_masks(interpreted, rate: float, dtype: torch.dtype) -> None:
    spec = MaskSpec.of(3, 2, 9, rate, WIDTH)
    generator = torch.Generator().manual_seed(0)
    kept = 0
    for block in BLOCKS:
        x = torch.randn(block[1], block[3], dtype=dtype, generator=generator)
        assert_passes_match_the_specification(interpreted, x, spec, block)
        kept += int(keep_mask(spec, block, x.device).sum())
    assert_passes_match_the_specification(interpreted, x.t().contiguous().t(), spec, block)
    if 0 < rate < 0.9:
        assert 0 < kept < sum(rows * cols for _, rows, _, cols in BLOCKS), "a vacuous comparison"


def test_interpreted_relu_without_dropout_and_empty_blocks(interpreted) -> None:
    x = torch.randn(33, 130, generator=torch.Generator().manual_seed(1))
    out, flag = interpreted.relu_scale(x, NO_DROPOUT, ((1 << 32) - 33, 33, (1 << 32) - 130, 130))
    assert torch.equal(bits(out), bits(torch.relu(x))) and torch.equal(flag, x > 0)
    empty = torch.empty(0, 5)
    assert interpreted.scale(empty, MaskSpec.of(0, 0, 1, 0.5, 5), (0, 0, 0, 5)).shape == (0, 5)
    with pytest.raises(ValueError, match="2D float32/float64"):
        interpreted.scale(x.half(), NO_DROPOUT, (0, 33, 0, 130))


class _Launches:
    """A kernel whose launches are counted, and during which `recorder` is told to look away (the
    interpreter's own bookkeeping is no part of what a GPU would run)."""

    def __init__(self, kernel, name: str, recorder: _Allocations):
        self.kernel, self.name, self.recorder = kernel, name, recorder

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.recorder.launches.append(self.name)
            self.recorder.inside = True
            try:
                return self.kernel[grid](*args, **kwargs)
            finally:
                self.recorder.inside = False

        return launch


class _Allocations(TorchDispatchMode):
    """Every torch operation outside kernel launches, and the bytes of each new storage it returned."""

    def __init__(self):
        super().__init__()
        self.inside, self.launches, self.operations, self.allocated = False, [], [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not self.inside:
            self.operations.append(str(func))
            given = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if _tensor(t)}
            for tensor in tree_flatten(result)[0]:
                if _tensor(tensor) and tensor.untyped_storage().data_ptr() not in given:
                    self.allocated.append(tensor.untyped_storage().nbytes())
        return result


def _tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


@pytest.mark.parametrize("operation", ["dropout", "relu_dropout"])
def test_the_cuda_path_launches_one_kernel_per_pass_and_allocates_only_its_results(
    interpreted, monkeypatch, operation: str
) -> None:
    """The autograd functions with the Triton passes (what CUDA tensors get), on CPU tensors: forward and
    backward are one launch each and no torch operation but the allocation of their results, which are
    the output (4 bytes an element) and, for the fused ReLU, its one-byte keep record; the torch
    specification, measured the same way, allocates whole-block int64 temporaries."""
    rows, cols, block = 45, 21, ((1 << 31) + 3, 45, 7, 21)
    spec, keep_record = MaskSpec.of(5, 1, 2, 0.5, WIDTH), rows * cols
    recorder = _Allocations()
    for name in ("_scale_kernel", "_relu_scale_kernel", "_scale_flagged_kernel"):
        monkeypatch.setattr(interpreted, name, _Launches(getattr(interpreted, name), name, recorder))
    function = {"dropout": dropout, "relu_dropout": relu_dropout}[operation]
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(2)).requires_grad_()
    upstream = torch.randn(rows, cols, generator=torch.Generator().manual_seed(3))

    def forward_and_backward(passes: ModuleType | None, recorder: _Allocations) -> tuple[list, list]:
        monkeypatch.setattr(backends, "passes_for", lambda tensor, any_rows=False: passes)
        with recorder:
            out = function(x, spec, block)
        forward = (recorder.launches[:], recorder.operations[:], recorder.allocated[:])
        recorder.launches.clear(), recorder.operations.clear(), recorder.allocated.clear()
        with recorder:
            (grad,) = torch.autograd.grad(out, x, upstream)
        backward = (recorder.launches[:], recorder.operations[:], recorder.allocated[:])
        return [out.detach(), grad], [forward, backward]

    (out, grad), (forward, backward) = forward_and_backward(interpreted, recorder)
    (want_out, want_grad), (plain, _) = forward_and_backward(None, _Allocations())
    assert torch.equal(bits(out), bits(want_out)) and torch.equal(bits(grad), bits(want_grad))
    fused = operation == "relu_dropout"
    assert forward[0] == ["_relu_scale_kernel" if fused else "_scale_kernel"]
    assert backward[0] == ["_scale_flagged_kernel" if fused else "_scale_kernel"]
    allowed = {"aten.empty.memory_format", "aten.view.dtype", "aten.detach.default"}
    assert set(forward[1]) <= allowed and set(backward[1]) <= allowed, (forward[1], backward[1])
    assert sorted(forward[2]) == ([keep_record, 4 * keep_record] if fused else [4 * keep_record])
    assert backward[2] == [4 * keep_record]
    assert max(plain[2]) == 8 * keep_record, "the measurement should see the specification's int64 blocks"


@pytest.mark.integration
def test_kernels_compile_for_gpus_with_a_32_bit_hash() -> None:
    """The kernels compile ahead of time for an H100 (sm_90) and an A100 (sm_80), no GPU needed, and the
    hash's multiplications are 32-bit in the compiled code (integration: Triton runs ptxas)."""
    compiler = pytest.importorskip("triton.compiler")
    from triton.backends.compiler import GPUTarget

    with fresh_kernels(interpret=False) as kernels:
        ints = {"rows": "i32", "cols": "i32", "row_stride": "i32", "col_stride": "i32"}
        ints |= {name: "i64" for name in kernels.PER_CALL}
        for name, pointers in [
            ("_scale_kernel", {"source": "*fp32", "out": "*fp32"}),
            ("_relu_scale_kernel", {"source": "*fp64", "out": "*fp64", "flag": "*u8"}),
            ("_scale_flagged_kernel", {"source": "*fp32", "flag": "*u8", "out": "*fp32"}),
        ]:
            kernel = getattr(kernels, name)
            constants = {"DROPPING": True, "FLOAT64": pointers["source"] == "*fp64"}
            constants |= {"BLOCK_ROWS": 32, "BLOCK_COLS": 128}
            names = kernel.arg_names
            signature = {a: "constexpr" if a in constants else {**ints, **pointers}[a] for a in names}
            constants = {a: v for a, v in constants.items() if a in names}
            for capability in (80, 90):
                source = compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants)
                compiled = triton.compile(
                    source, target=GPUTarget("cuda", capability, 32), options={"enable_fp_fusion": False}
                )
                assert compiled.asm["cubin"], f"{name} for sm_{capability}"
            ttir = compiled.asm["ttir"]
            if name != "_scale_flagged_kernel":
                assert re.search(r"dense<2146121005> : tensor<\d+x\d+xi32>", ttir), "the tile's hash"
                assert not re.search(r"dense<2146121005> : tensor<[\dx]+xi64>", ttir)


@pytest.mark.integration  # Triton runs ldconfig and ptxas
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_kernels_draw_the_specified_masks(monkeypatch) -> None:
    """On a GPU: the compiled kernels, and training's autograd functions with them, against the
    specification, on blocks of a realistic size too."""
    device = torch.device("cuda")
    with fresh_kernels(interpret=False) as kernels:
        for dtype in (torch.float32, torch.float64):
            for rate in RATES:
                spec = MaskSpec.of(3, 2, 9, rate, 1000)
                for block in [*BLOCKS, (12_345, 100_003, 0, 128), ((1 << 31) - 50_000, 100_000, 900, 200)]:
                    x = torch.randn(block[1], block[3], dtype=dtype, device=device)
                    assert_passes_match_the_specification(kernels, x, spec, block)
        monkeypatch.setattr(backends, "passes_for", lambda tensor, any_rows=False: kernels)
        x = torch.randn(70_001, 128, device=device, requires_grad=True)
        spec, block = MaskSpec.of(1, 1, 1, 0.5, 128), (5, 70_001, 0, 128)
        out = relu_dropout(x, spec, block)
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
    flag = (x > 0) & keep_mask(spec, block, device)
    assert torch.equal(bits(out.detach()), bits(torch.where(flag, x.detach() * 2.0, 0.0)))
    assert torch.equal(bits(grad), bits(torch.where(flag, 2.0, 0.0)))
